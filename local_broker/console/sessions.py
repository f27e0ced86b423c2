"""Console sessions: a SAS policy name and key (or a one-time login link) buys a session cookie.

A session holds the policy it was opened with, so every console action checks that policy's rights the way
the wire endpoints check a token's (Listen, Send, Manage). Sessions live in memory: a broker restart
logs everyone out.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from dataclasses import dataclass

from local_broker.auth import NamespaceAuth, SharedAccessPolicy
from local_broker.engine import UnauthorizedError

COOKIE = "sbfed-console"
SESSION_SECONDS = 12 * 3600


@dataclass(frozen=True)
class Session:
    policy: SharedAccessPolicy
    csrf: str  # echoed by every form the console renders; a POST without it is refused
    expires_at: float

    def require(self, right: str) -> None:
        """The Service Bus authorization error unless the session's policy has `right`."""
        if right not in self.policy.rights:
            raise UnauthorizedError(f"Unauthorized access. '{right}' claim(s) are required to perform this "
                                    f"operation. Policy: '{self.policy.name}'.")


class Sessions:
    """Open sessions of one namespace's console, and its one-time login token."""

    def __init__(self, auth: NamespaceAuth, login_policy: SharedAccessPolicy) -> None:
        self.auth = auth
        self._login_policy = login_policy
        self._one_time: str | None = secrets.token_urlsafe(24)
        self._open: dict[str, Session] = {}
        self._lock = threading.Lock()  # the HTTP server serves each connection on its own thread

    def one_time_token(self) -> str | None:
        """The token of the login link `serve` prints (None once used)."""
        return self._one_time

    def login_with_key(self, policy_name: str, key: str, now: float) -> tuple[str, Session]:
        """(cookie value, session) for a policy name and key of the namespace, or UnauthorizedError. A whole
        connection string pasted as the key brings its own policy name and key."""
        fields = dict(part.split("=", 1) for part in key.strip().split(";") if "=" in part)
        if "SharedAccessKey" in fields:
            policy_name, key = fields.get("SharedAccessKeyName", policy_name), fields["SharedAccessKey"]
        claim = self.auth.verify_plain(policy_name.strip(), key.strip())
        return self._open_session(claim.policy, now)

    def login_once(self, token: str, now: float) -> tuple[str, Session]:
        """The one-time link: opens a session for the policy of the printed connection string, once."""
        with self._lock:
            expected, self._one_time = self._one_time, None
            if expected is None or not hmac.compare_digest(expected, token):
                self._one_time = expected
                raise UnauthorizedError("The login link is not valid (it works once); paste a policy name "
                                        "and key instead.")
        return self._open_session(self._login_policy, now)

    def _open_session(self, policy: SharedAccessPolicy, now: float) -> tuple[str, Session]:
        cookie = secrets.token_urlsafe(32)
        session = Session(policy, secrets.token_urlsafe(16), now + SESSION_SECONDS)
        with self._lock:
            self._open = {k: s for k, s in self._open.items() if s.expires_at > now}
            self._open[cookie] = session
        return cookie, session

    def find(self, cookie: str | None, now: float) -> Session | None:
        if not cookie:
            return None
        with self._lock:
            session = self._open.get(cookie)
        return session if session is not None and session.expires_at > now else None

    def close(self, cookie: str | None) -> None:
        with self._lock:
            self._open.pop(cookie or "", None)
