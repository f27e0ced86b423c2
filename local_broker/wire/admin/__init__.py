"""HTTPS ATOM management endpoint (`ServiceBusAdministrationClient`) <-> engine calls; no semantics here.

`server.AdminServer` serves one namespace; `operations` maps requests to engine calls; `descriptions`,
`rule_codec`, `typed_values`, `durations` and `atom` are the XML codec.
"""
