"""What a namespace's management endpoint answered, or why it could not be reached, as one line naming the
namespace and saying what to do (the SDK's own message spans lines and quotes the raw XML)."""

from __future__ import annotations

import re

from azure.core.exceptions import AzureError, HttpResponseError

DETAIL = re.compile(r"<Detail>(.*?)</Detail>", re.DOTALL)
HINTS = {
    401: "check the connection string's SharedAccessKeyName and SharedAccessKey",
    403: "the policy needs the Manage right",
}
CERTIFICATE_HINT = ("pass the CA or server certificate with --verify CERT (the local broker's: "
                    "<data dir>/broker-cert.pem, which `sbfed broker serve` prints), or trust the local "
                    "broker once for every client with `sbfed broker trust`")


class NamespaceFailed(Exception):
    """A namespace's management endpoint refused a request or could not be reached."""

    def __init__(self, namespace: str, endpoint: str, error: AzureError, doing: str = "") -> None:
        self.namespace, self.endpoint, self.error, self.doing = namespace, endpoint, error, doing
        super().__init__(str(self))

    def __str__(self) -> str:
        doing = f"{self.doing}: " if self.doing else ""
        return f"namespace '{self.namespace}' ({self.endpoint}): {doing}{one_line(self.error)}"


def one_line(error: AzureError) -> str:
    if isinstance(error, HttpResponseError) and error.status_code is not None:
        return _refused(error)
    text = str(error)
    verify = re.search(r"CERTIFICATE_VERIFY_FAILED\]? ?(certificate verify failed: [^(\n]*)", text)
    if verify:
        return f"the server's certificate is not trusted ({verify.group(1).strip()}): {CERTIFICATE_HINT}"
    return f"could not be reached: {_first_line(text)}"


def _refused(error: HttpResponseError) -> str:
    try:
        body = error.response.text() if error.response is not None else ""
    except (UnicodeDecodeError, AttributeError):
        body = ""
    detail = DETAIL.search(body or "")
    said = (detail.group(1).strip() if detail else _first_line(error.reason or str(error))).rstrip(".")
    hint = HINTS.get(error.status_code)
    return f"{error.status_code} {error.reason}: {said}" + (f"; {hint}" if hint else "")


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "no answer"
