"""The AMQP 1.0 endpoint of the local broker, on python-qpid-proton (servicebus-wire.md is the dialect).

- `reactor`: the thread that owns every engine; group commit once per reactor turn; `EngineThread.call`
  for other threads.
- `sasl`: the listening socket of a namespace and its SASL exchange (MSSBCBS, ANONYMOUS, PLAIN with a policy).
- `streams`, `layer`, `tls_stream`, `websocket`: AMQPS and AMQP over WebSockets, layers between the socket
  and SASL/proton.
- `endpoint`: connections, links, transfers and settlements of one namespace -> engine calls.
- `management`: the `$cbs` and `$management` request/response nodes.
- `messages`, `codec`, `values`: engine messages <-> AMQP sections and values.
- `compat`: what proton 0.40 needs help with (binary tags, 3-field errors, link refusal, socket I/O).
"""
