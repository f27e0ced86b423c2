"""SAS verification: the checks both endpoints rely on."""

import base64
import hashlib
import hmac
from urllib.parse import quote

import pytest

from local_broker.auth import (
    LISTEN,
    MANAGE,
    SEND,
    NamespaceAuth,
    SharedAccessPolicy,
    generate_sas_token,
)
from local_broker.engine.errors import UnauthorizedError

NOW = 1_800_000_000
ROOT = SharedAccessPolicy("RootManageSharedAccessKey", "root-key")
SENDER = SharedAccessPolicy("sender", "send-key", frozenset({SEND}))
AUTH = NamespaceAuth([ROOT, SENDER])


def token(audience="sb://127.0.0.1:5672/q1", policy=ROOT, key=None, expiry=NOW + 3600):
    return generate_sas_token(audience, policy.name, key or policy.key, expiry)


def test_valid_token_grants_the_policy_rights_within_its_audience():
    claim = AUTH.verify_token(token(), NOW)
    assert claim.authorizes("q1", LISTEN) and claim.authorizes("Q1/$DeadLetterQueue", SEND)
    assert not claim.authorizes("q2", LISTEN)
    assert not claim.authorizes("q10", LISTEN)  # a prefix only counts at a path boundary


def test_namespace_wide_audience_covers_every_entity():
    claim = AUTH.verify_token(token("https://127.0.0.1:5300"), NOW)
    assert claim.authorizes("t1/Subscriptions/s1", MANAGE)


@pytest.mark.parametrize(
    "bad",
    [
        token(key="wrong-key"),
        token(expiry=NOW),
        token(policy=SharedAccessPolicy("ghost", "k")),
        "Bearer abc",
        "SharedAccessSignature sr=x&sig=y",
        "SharedAccessSignature sr=x&sig=y&se=soon&skn=RootManageSharedAccessKey",
    ],
)
def test_bad_tokens_are_refused_with_the_authorization_error(bad):
    with pytest.raises(UnauthorizedError) as err:
        AUTH.verify_token(bad, NOW)
    assert err.value.amqp_condition == "amqp:unauthorized-access"


def test_send_only_policy_cannot_listen():
    claim = AUTH.verify_token(token(policy=SENDER), NOW)
    claim.require("q1", SEND)
    with pytest.raises(UnauthorizedError, match="'Listen' claim"):
        claim.require("q1", LISTEN)


def test_sasl_plain_uses_policy_name_and_key():
    assert AUTH.verify_plain("sender", "send-key").authorizes("any/entity", SEND)
    with pytest.raises(UnauthorizedError):
        AUTH.verify_plain("sender", "nope")


def test_manage_without_send_and_listen_is_not_a_valid_policy():
    with pytest.raises(ValueError, match="Manage"):
        SharedAccessPolicy("odd", "k", frozenset({MANAGE}))


def js_token(audience: str, fields: str, policy: SharedAccessPolicy = ROOT) -> str:
    """A token as the JavaScript SDK writes it: `sr` percent-encoded by encodeURIComponent and signed as
    encoded, the signature percent-encoded too, fields in the order `fields` names them."""
    sr = quote(audience, safe="-_.!~*'()")
    signature = hmac.new(policy.key.encode(), f"{sr}\n{NOW + 60}".encode(), hashlib.sha256).digest()
    values = {"sr": sr, "sig": quote(base64.b64encode(signature).decode(), safe=""), "se": str(NOW + 60),
              "skn": policy.name}
    return "SharedAccessSignature " + "&".join(f"{name}={values[name]}" for name in fields.split(","))


def test_audiences_the_javascript_sdk_signs():
    # The admin client signs each request for its lower-cased URL, query included: the query is no scope.
    url = "https://127.0.0.1:5300/$resources/queues?$skip=0&$top=100&api-version=2021-05"
    listing = AUTH.verify_token(js_token(url, "sig,se,skn,sr"), NOW)
    assert listing.authorizes("$Resources/Queues", MANAGE) and not listing.authorizes("q1", MANAGE)
    rule = AUTH.verify_token(js_token(
        "https://127.0.0.1:5300/t1/subscriptions/s1/rules/r1?api-version=2021-05", "sig,se,skn,sr"), NOW)
    assert rule.authorizes("t1/Subscriptions/s1/Rules/r1", MANAGE)
    assert not rule.authorizes("t1/Subscriptions/s1", MANAGE)
    # Its supplementary (forwarding) token names the namespace as host:port, without a scheme.
    namespace = AUTH.verify_token(js_token("127.0.0.1:5300", "sr,sig,se,skn"), NOW)
    assert namespace.authorizes("q1", MANAGE) and namespace.authorizes("t1/Subscriptions/s1", MANAGE)
