"""Built-in effects: an HTTP POST with an Idempotency-Key, an email with a stable Message-ID, a file
delivered by atomic rename. Each is an :class:`Effect` (for ``perform(effect, ...)`` in task code)
and has an operator (``*EffectOperator``).

Each one says precisely when a call certainly did not take effect (:class:`EffectNotPerformed`:
the ledger row becomes ``failed`` and a later attempt sends it) and treats everything else as
"unknown" (the row stays ``pending`` and is reconciled before anything is sent again).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import smtplib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formatdate
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from airflow_idempotent.effects.effect import Effect, EffectCall, EffectResult, Lookup
from airflow_idempotent.effects.errors import EffectError, EffectNotPerformed
from airflow_idempotent.effects.operator import EffectOperator
from airflow_idempotent.window import Window

if TYPE_CHECKING:
    from airflow.sdk import Context

#: HTTP statuses after which the request may or may not have taken effect: the row stays pending.
_HTTP_UNKNOWN = {408, 409, 425, 429}
IDEMPOTENCY_HEADER = "Idempotency-Key"


# ----------------------------------------------------------------------------------- HTTP
@dataclass
class HttpPostEffect(Effect):
    """POST a JSON body (or bytes) with an ``Idempotency-Key`` header carrying the effect's key.

    :param url: an absolute URL, or
    :param endpoint: a path appended to the base URL of the Airflow HTTP connection `http_conn_id`
        (its host, schema as the protocol, port, login/password as basic auth, extra as headers).
    :param lookup_url: a URL (or endpoint) with ``{key}``: GET answers 200 when the target has the
        key (the reference is read from the JSON body) and 404 when it has not. Used to reconcile
        an attempt that crashed between the call and the ledger's commit.
    :param target_deduplicates: the target honours Idempotency-Key (a repeated key gets the
        original response, never a second effect), so a crashed attempt is reconciled by sending
        again with the same key.
    :param reference_field: the JSON field of the response holding the target's id.
    """

    name: str
    url: str | None = None
    endpoint: str = ""
    http_conn_id: str | None = None
    json: Any = None
    data: bytes | str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    lookup_url: str | None = None
    target_deduplicates: bool = False
    reference_field: str = "id"
    timeout: float = 30.0

    def __post_init__(self) -> None:
        if not self.url and not self.http_conn_id:
            raise EffectError(f"HttpPostEffect {self.name!r} needs url=... or http_conn_id=... (+ endpoint)")

    def perform(self, call: EffectCall) -> EffectResult:
        import httpx

        url, headers, auth = self._target(self.url, self.endpoint)
        headers = {**headers, IDEMPOTENCY_HEADER: call.idempotency_key}
        kwargs: dict[str, Any] = {"headers": headers}
        if self.data is not None:
            kwargs["content"] = self.data
        else:
            kwargs["json"] = self.json
        try:
            with httpx.Client(timeout=self.timeout, auth=auth) as client:
                response = client.post(url, **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as err:
            raise EffectNotPerformed(f"could not connect to {url}: {err}") from err
        status = response.status_code
        if 200 <= status < 300:
            return EffectResult(
                _json_field(response, self.reference_field) or response.headers.get("Location"),
                {
                    "url": url,
                    "status": status,
                    "replayed": response.headers.get("Idempotent-Replayed") == "true",
                },
            )
        body = response.text[:300]
        if 400 <= status < 500 and status not in _HTTP_UNKNOWN:
            raise EffectNotPerformed(f"{url} refused the request: HTTP {status} {body}")
        raise HttpOutcomeUnknown(f"{url} answered HTTP {status} {body}: the request may have taken effect")

    def lookup(self, call: EffectCall) -> Lookup:
        import httpx

        if self.lookup_url:
            template = self.lookup_url
            absolute = "://" in template
            url, headers, auth = self._target(template if absolute else None, "" if absolute else template)
            url = url.replace("{key}", call.idempotency_key)
            with httpx.Client(timeout=self.timeout, auth=auth) as client:
                response = client.get(url, headers=headers)
            if response.status_code == 200:
                return Lookup.found(_json_field(response, self.reference_field), f"GET {url}: 200")
            if response.status_code == 404:
                return Lookup.absent(f"GET {url}: 404")
            return Lookup.unknown(f"GET {url} answered HTTP {response.status_code}")
        if self.target_deduplicates:
            return Lookup.replay(f"the target deduplicates on {IDEMPOTENCY_HEADER}")
        return Lookup.unknown("no lookup_url, and the target is not declared to deduplicate on the key")

    def _target(self, url: str | None, endpoint: str) -> tuple[str, dict[str, str], Any]:
        headers = {str(k): str(v) for k, v in self.headers.items()}
        if url:
            return url, headers, None
        from airflow.sdk import BaseHook

        assert self.http_conn_id is not None
        conn = BaseHook.get_connection(self.http_conn_id)
        host = conn.host or ""
        base = host if "://" in host else f"{conn.schema or 'http'}://{host}"
        if conn.port:
            base = f"{base.rstrip('/')}:{conn.port}"
        extra = conn.extra_dejson if isinstance(conn.extra_dejson, Mapping) else {}
        headers = {**{str(k): str(v) for k, v in extra.items()}, **headers}
        auth = (conn.login, conn.password or "") if conn.login else None
        return f"{base.rstrip('/')}/{endpoint.lstrip('/')}", headers, auth


class HttpOutcomeUnknown(Exception):
    """The target answered in a way that does not say whether the request took effect."""


def _json_field(response: Any, name: str) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    value = body.get(name) if isinstance(body, Mapping) else None
    return None if value is None else str(value)


# ----------------------------------------------------------------------------------- email
@dataclass
class EmailEffect(Effect):
    """An HTML email through an Airflow SMTP connection, with ``Message-ID: <idempotency key@domain>``.

    Sent through ``airflow.providers.smtp`` when it is installed (with its own resend loop turned
    off: a resend after an unclear failure is exactly the duplicate this avoids), else through
    smtplib with the connection's host, port, login and the provider's extras (``disable_ssl``,
    ``disable_tls``, ``from_email``, ``timeout``).

    SMTP cannot be asked whether a message was accepted, so a crashed attempt waits for a human
    decision unless ``lookup`` is given (e.g. a search of the Sent folder by Message-ID).
    """

    name: str
    to: str | Sequence[str]
    subject: str
    html_content: str
    smtp_conn_id: str = "smtp_default"
    from_email: str | None = None
    cc: str | Sequence[str] | None = None
    bcc: str | Sequence[str] | None = None
    message_id_domain: str | None = None
    client: Literal["auto", "provider", "smtplib"] = "auto"
    lookup_message: Callable[[str], Lookup] | None = None

    def message_id(self, call: EffectCall, from_email: str | None = None) -> str:
        sender = from_email or self.from_email or ""
        domain = self.message_id_domain or (
            sender.rsplit("@", 1)[1] if "@" in sender else "airflow-idempotent"
        )
        return f"<{call.idempotency_key}@{domain.strip('<> ')}>"

    def perform(self, call: EffectCall) -> EffectResult:
        use_provider = self.client == "provider"
        if self.client == "auto":
            try:
                import airflow.providers.smtp.hooks.smtp  # noqa: F401

                use_provider = True
            except ImportError:
                use_provider = False
        message_id = self._send_with_provider(call) if use_provider else self._send_with_smtplib(call)
        return EffectResult(
            message_id,
            {
                "message_id": message_id,
                "to": _addresses(self.to),
                "smtp_conn_id": self.smtp_conn_id,
                "client": "provider" if use_provider else "smtplib",
            },
        )

    def lookup(self, call: EffectCall) -> Lookup:
        if self.lookup_message is not None:
            return self.lookup_message(self.message_id(call))
        return Lookup.unknown(
            f"SMTP cannot be asked whether it accepted Message-ID {self.message_id(call)}: look for it in "
            "the recipient's mailbox or the relay's log"
        )

    def _send_with_provider(self, call: EffectCall) -> str:
        from airflow.providers.smtp.hooks.smtp import SmtpHook

        class SingleSendSmtpHook(SmtpHook):
            @property
            def smtp_retry_limit(self) -> int:  # no resend after an unclear failure
                return 0

        hook = SingleSendSmtpHook(smtp_conn_id=self.smtp_conn_id)
        try:
            hook.get_conn()
        except Exception as err:
            raise EffectNotPerformed(f"could not connect to SMTP ({self.smtp_conn_id}): {err}") from err
        try:
            message_id = self.message_id(call, self.from_email or hook.from_email)
            try:
                hook.send_email_smtp(
                    to=_addresses(self.to),
                    subject=self.subject,
                    html_content=self.html_content,
                    from_email=self.from_email,
                    cc=_addresses(self.cc) or None,
                    bcc=_addresses(self.bcc) or None,
                    custom_headers={"Message-ID": message_id, "X-Idempotency-Key": call.idempotency_key},
                )
            except (smtplib.SMTPRecipientsRefused, smtplib.SMTPSenderRefused, smtplib.SMTPDataError) as err:
                raise EffectNotPerformed(f"the SMTP server refused the message: {err}") from err
            except OSError:  # disconnected, timed out, ...: the server may have accepted it
                raise
            except Exception as err:  # the hook refused before sending (no from_email, ...)
                raise EffectNotPerformed(f"the message was not sent: {err}") from err
        finally:
            with contextlib.suppress(Exception):
                hook.__exit__(None, None, None)
        return message_id

    def _send_with_smtplib(self, call: EffectCall) -> str:
        from airflow.sdk import BaseHook

        conn = BaseHook.get_connection(self.smtp_conn_id)
        extra = conn.extra_dejson if isinstance(conn.extra_dejson, Mapping) else {}
        from_email = self.from_email or extra.get("from_email")
        if not from_email:
            raise EffectNotPerformed(f"no from_email: pass it, or set it in the extra of {self.smtp_conn_id}")
        use_ssl = not bool(extra.get("disable_ssl", False))
        starttls = not bool(extra.get("disable_tls", False))
        timeout = int(extra.get("timeout", 30))
        to, cc, bcc = _addresses(self.to), _addresses(self.cc), _addresses(self.bcc)
        message_id = self.message_id(call, from_email)
        msg = EmailMessage()
        msg["Subject"] = self.subject
        msg["From"] = from_email
        msg["To"] = ", ".join(to)
        if cc:
            msg["Cc"] = ", ".join(cc)
        msg["Date"] = formatdate(usegmt=True)
        msg["Message-ID"] = message_id
        msg["X-Idempotency-Key"] = call.idempotency_key
        msg.set_content(self.html_content, subtype="html")
        try:
            client: smtplib.SMTP = (smtplib.SMTP_SSL if use_ssl else smtplib.SMTP)(
                conn.host or "localhost", int(conn.port or (465 if use_ssl else 25)), timeout=timeout
            )
            if starttls and not use_ssl:
                client.starttls()
                client.ehlo()
            if conn.login and conn.password:
                client.login(conn.login, conn.password)
        except Exception as err:
            raise EffectNotPerformed(f"could not connect to SMTP ({self.smtp_conn_id}): {err}") from err
        try:
            client.send_message(msg, from_addr=from_email, to_addrs=[*to, *cc, *bcc])
        except (smtplib.SMTPRecipientsRefused, smtplib.SMTPSenderRefused, smtplib.SMTPDataError) as err:
            raise EffectNotPerformed(f"the SMTP server refused the message: {err}") from err
        finally:
            with contextlib.suppress(Exception):
                client.quit()
        return message_id


def _addresses(value: str | Sequence[str] | None) -> list[str]:
    if not value:
        return []
    if isinstance(value, str):
        return [a.strip() for a in value.replace(";", ",").split(",") if a.strip()]
    return [str(a) for a in value]


# ----------------------------------------------------------------------------------- file
@dataclass
class FileDeliveryEffect(Effect):
    """Deliver bytes as ``directory/filename``: written to a temporary name, fsync'd, atomically renamed.

    The reader never sees a partial file. A rerun delivers byte-identical content (the content
    must be deterministic for the window) and never rewrites a delivered file: a destination that
    already holds these bytes is recorded as delivered; one with other bytes is refused. A re-sent
    generation (corrective backfill with resend_effects) goes to ``name.g<n>.ext`` unless the
    filename contains ``{generation}``. Reconciliation looks at the destination: present with the
    same digest is done, absent is delivered now.

    :param content: bytes, text (UTF-8), or a callable returning bytes (called only when needed).
    """

    name: str
    directory: str | os.PathLike[str]
    filename: str
    content: bytes | str | Callable[[], bytes]
    mode: int = 0o644
    _data: bytes | None = field(default=None, init=False, repr=False)

    def data(self) -> bytes:
        if self._data is None:
            raw = self.content() if callable(self.content) else self.content
            self._data = raw.encode() if isinstance(raw, str) else bytes(raw)
        return self._data

    def destination(self, call: EffectCall) -> Path:
        name = self.filename
        if "{generation}" in name:
            name = name.replace("{generation}", str(call.generation))
        elif call.generation > 1:
            stem, dot, ext = name.rpartition(".")
            name = f"{stem}.g{call.generation}.{ext}" if dot and stem else f"{name}.g{call.generation}"
        if "/" in name or name in ("", ".", ".."):
            raise EffectError(f"file name {name!r} must be a plain name inside {self.directory}")
        return Path(self.directory) / name

    def perform(self, call: EffectCall) -> EffectResult:
        try:
            data = self.data()
        except Exception as err:  # nothing was written: the content could not be produced
            raise EffectNotPerformed(f"the content of {self.filename} could not be produced: {err}") from err
        digest = hashlib.sha256(data).hexdigest()
        dest = self.destination(call)
        details = {"path": str(dest), "sha256": digest, "bytes": len(data)}
        if dest.exists():
            if _sha256(dest) == digest:
                return EffectResult(_file_reference(dest, digest), {**details, "already_present": True})
            raise EffectNotPerformed(
                f"{dest} already exists with other content (sha256 {_sha256(dest)}, this delivery {digest}): "
                "a delivered file is never rewritten; move it away, or deliver under another name"
            )
        tmp = self._tmp_path(call, dest)
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, self.mode)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as err:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise EffectNotPerformed(f"could not write {tmp}: {err}") from err
        os.replace(tmp, dest)  # atomic: the reader sees no file or the whole file
        _fsync_dir(dest.parent)
        return EffectResult(_file_reference(dest, digest), details)

    def lookup(self, call: EffectCall) -> Lookup:
        dest = self.destination(call)
        for stale in dest.parent.glob(f".{dest.name}.{call.idempotency_key[5:21]}.*.tmp"):
            with contextlib.suppress(OSError):
                stale.unlink()
        if not dest.exists():
            return Lookup.absent(f"{dest} does not exist")
        digest = hashlib.sha256(self.data()).hexdigest()
        if _sha256(dest) == digest:
            return Lookup.found(_file_reference(dest, digest), f"{dest} holds these bytes")
        return Lookup.unknown(f"{dest} exists with other content (sha256 {_sha256(dest)}, expected {digest})")

    @staticmethod
    def _tmp_path(call: EffectCall, dest: Path) -> Path:
        return dest.with_name(f".{dest.name}.{call.idempotency_key[5:21]}.{os.getpid()}.tmp")


def _file_reference(path: Path, digest: str) -> str:
    return f"{path}#sha256={digest}"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# ----------------------------------------------------------------------------------- operators
class HttpPostEffectOperator(EffectOperator):
    """POST once per (DAG, task, window, effect, key) with an Idempotency-Key header (HttpPostEffect)."""

    template_fields: Sequence[str] = ("key", "url", "endpoint", "json", "headers", "lookup_url")
    template_fields_renderers = {"json": "json"}  # noqa: RUF012

    def __init__(
        self,
        *,
        url: str | None = None,
        endpoint: str = "",
        http_conn_id: str | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        lookup_url: str | None = None,
        target_deduplicates: bool = False,
        reference_field: str = "id",
        request_timeout: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not url and not http_conn_id:
            raise EffectError(f"{self.task_id}: pass url=... or http_conn_id=... (+ endpoint)")
        self.url = url
        self.endpoint = endpoint
        self.http_conn_id = http_conn_id
        self.json = json
        self.headers = dict(headers or {})
        self.lookup_url = lookup_url
        self.target_deduplicates = target_deduplicates
        self.reference_field = reference_field
        self.request_timeout = request_timeout

    def build_effect(self, context: Context | Mapping[str, Any], window: Window) -> Effect:
        return HttpPostEffect(
            name=self.effect_name,
            url=self.url,
            endpoint=self.endpoint,
            http_conn_id=self.http_conn_id,
            json=self.json,
            headers=self.headers,
            lookup_url=self.lookup_url,
            target_deduplicates=self.target_deduplicates,
            reference_field=self.reference_field,
            timeout=self.request_timeout,
        )


class EmailEffectOperator(EffectOperator):
    """Send an email once per (DAG, task, window, effect, key), with a stable Message-ID (EmailEffect)."""

    template_fields: Sequence[str] = ("key", "to", "subject", "html_content", "from_email")
    template_fields_renderers = {"html_content": "html"}  # noqa: RUF012

    def __init__(
        self,
        *,
        to: str | Sequence[str],
        subject: str,
        html_content: str,
        smtp_conn_id: str = "smtp_default",
        from_email: str | None = None,
        message_id_domain: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.to = to
        self.subject = subject
        self.html_content = html_content
        self.smtp_conn_id = smtp_conn_id
        self.from_email = from_email
        self.message_id_domain = message_id_domain

    def build_effect(self, context: Context | Mapping[str, Any], window: Window) -> Effect:
        return EmailEffect(
            name=self.effect_name,
            to=self.to,
            subject=self.subject,
            html_content=self.html_content,
            smtp_conn_id=self.smtp_conn_id,
            from_email=self.from_email,
            message_id_domain=self.message_id_domain,
        )


class FileDeliveryEffectOperator(EffectOperator):
    """Deliver a file once per (DAG, task, window, effect, key) by atomic rename (FileDeliveryEffect).

    :param content: bytes or text, or ``content(context, window) -> bytes`` (called only when the
        effect is needed); it must give the same bytes for the same window.
    """

    template_fields: Sequence[str] = ("key", "directory", "filename")

    def __init__(
        self,
        *,
        directory: str,
        filename: str,
        content: bytes | str | Callable[[Any, Window], bytes],
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.directory = directory
        self.filename = filename
        self.content = content

    def build_effect(self, context: Context | Mapping[str, Any], window: Window) -> Effect:
        content = self.content
        body: bytes | str | Callable[[], bytes] = (
            functools.partial(content, context, window) if callable(content) else content
        )
        return FileDeliveryEffect(
            name=self.effect_name, directory=self.directory, filename=self.filename, content=body
        )
