"""Where benchmark data files come from: a mirror folder, the download cache, or their URL.

Data files are never committed. A suite manifest names each one by a raw URL pinned to a commit,
its checksum and its path inside a mirror folder (:class:`DataFile`). The checksum is its sha256,
or its ``git_blob_sha1`` (sha1 of ``blob <size>\0`` followed by the bytes: the id the pinned
commit's tree gives the file, known for files too large for a mirror whose sha256 nobody
computed), or both; a file pinned by both must match both. :func:`resolve` finds one file:

1. ``<mirror>/<path>`` when the user named a mirror folder (``--biascheck-data`` /
   ``BIASCHECK_DATA_DIR``);
2. ``<cache_dir>/<pin>/<basename>``, the content-addressed download cache (``pin``: the sha256,
   else the git blob id);
3. a download of ``url`` (HTTPS; plain HTTP only to loopback hosts, which is what tests use),
   streamed to a temp file in the cache while hashing, verified, then ``os.replace``-d into place.
   A checksum mismatch or an interrupted download never leaves a file at the final path.

Every file found is verified against each checksum it is pinned by (hashed in 1 MiB chunks; an
unchanged file is hashed at most once per process, and parsed at most once by each parser that
goes through :func:`parsed_file`); a mismatch is a one-line error wherever the file came from. ``offline=True`` forbids step 3.

An optional file (a BBQ category file) that is in neither the mirror nor the cache and cannot be
downloaded (offline, or the download failed) comes back as ``origin == "missing"`` with the reason,
instead of an error: the suite runs without it, and the run reports the gap as a failed check
unless the user accepts it (``--biascheck-allow-missing-data``). Everything else that cannot be
resolved is a one-line :class:`BiascheckError`.
"""

from __future__ import annotations

import collections
import hashlib
import http.client
import ipaddress
import os
import re
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal, TypeVar

from biascheck.core.errors import BiascheckError
from biascheck.core.spelling import Option, option

CHUNK_SIZE = 1 << 20  # 1 MiB: hashing and download chunk
DEFAULT_TIMEOUT = 60.0

Origin = Literal["mirror", "cache", "download", "missing"]
T = TypeVar("T")

# The checksums a file may be pinned by, in the order they are checked: each one's pattern and fix.
PINS = {
    "sha256": (re.compile(r"[0-9a-f]{64}"), "give the file's sha256 as 64 lowercase hex digits (see sources.json in the data mirror)"),
    "git_blob_sha1": (
        re.compile(r"[0-9a-f]{40}"),
        "give the file's git blob id as 40 lowercase hex digits (git_blob_sha1 in sources.json in the data mirror)",
    ),
}
# Keys a [data.<key>] table may hold; "category" belongs to the manifest layer and is ignored here.
# A file without a url is read from the data folder alone (a dataset of the user's own).
_MANIFEST_KEYS = ("path", "url", *PINS, "optional", "category", "rows", "rows_left_out")
_REQUIRED_KEYS = ("path",)
# The option that accepts a file the manifest pins by no checksum (a dataset of the user's own):
# its bytes cannot be verified, so the results record it and its numbers compare with no one else's.
ALLOW_UNPINNED = "--biascheck-allow-unpinned-data"

_FIX_URL = "use the file's https raw URL pinned to a commit (see sources.json in the data mirror)"
FIX_PIN = (
    "pin it by sha256 (64 lowercase hex digits) or git_blob_sha1 (40: the id git gives the file at the pinned commit), "
    "as sources.json in the data mirror lists them"
)
_FIX_PATH = "give a relative path inside the mirror folder, e.g. <benchmark>/<file>, as the packaged suites do"
# Where a mirror folder is named: the plugin's option (the command speaks of its --data), or the
# Python API's argument (biascheck.load_suite passes it), so that each error names what its caller can change.
MIRROR_OPTION = Option("data")


def _fix_mirror(option: object) -> str:
    return f'point {option} at a mirror folder (see docs/suites.md, "Data")'


def _is_loopback(host: str) -> bool:
    host = host.lower().rstrip(".")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url_problem(url: str) -> str | None:
    """Why ``url`` may not be fetched, or None: https anywhere, http only to loopback hosts."""
    try:
        parsed = urllib.parse.urlsplit(url)
        host = parsed.hostname
        parsed.port  # noqa: B018 -- raises ValueError on a malformed port
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if not parsed.scheme:
        return "has no scheme"
    if parsed.scheme not in ("https", "http"):
        return f"uses scheme {parsed.scheme!r}"
    if not host:
        return "has no host"
    if parsed.scheme == "http" and not _is_loopback(host):
        return "uses plain http to a non-loopback host"
    return None


def _path_problem(path: str) -> str | None:
    if not path or not path.strip():
        return "is empty"
    if "\\" in path:
        return "contains a backslash"
    pure = PurePosixPath(path)
    if pure.is_absolute() or re.match(r"[A-Za-z]:", path):
        return "is absolute"
    if ".." in pure.parts:
        return "contains '..'"
    if pure.name in ("", "."):
        return "does not name a file"
    return None


@dataclass(frozen=True)
class DataFile:
    """One benchmark data file as a manifest names it (``[data.<key>]``)."""

    key: str  # name in the manifest, e.g. "samples" or "Age"
    path: str  # relative path inside a mirror, e.g. "kobbq/KoBBQ_test_samples.tsv"
    url: str | None  # None: read from the data folder alone, never downloaded
    sha256: str | None  # lowercase hex, 64 chars; None when the file is pinned by git_blob_sha1 alone (or by nothing)
    optional: bool = False
    git_blob_sha1: str | None = None  # lowercase hex, 40 chars: sha1 of b"blob <size>\0" + the bytes
    # The records the file holds, as the manifest declares them: a listing counts a suite whose
    # files are not here from them (Benchmark.declared_cases); nothing checks a file against it.
    rows: int | None = None
    # Of those, the records its benchmark leaves out when it reads them (a BBQ-format row whose
    # stereotyped groups name no option), as counted in the pinned file: not counted as cases.
    rows_left_out: int = 0

    @property
    def basename(self) -> str:
        return PurePosixPath(self.path).name

    @property
    def pins(self) -> dict[str, str]:
        """The checksums the file is pinned by, by field name; the file must match every one."""
        return {name: value for name, value in (("sha256", self.sha256), ("git_blob_sha1", self.git_blob_sha1)) if value is not None}

    @property
    def pin(self) -> str:
        """The one id of the file's content (its download cache folder, its part of a fingerprint):
        the sha256, else the git blob id. A file pinned by both keeps the sha256 it was cached and
        fingerprinted by before blob ids existed."""
        return self.sha256 or self.git_blob_sha1 or ""

    @classmethod
    def from_manifest(cls, key: str, table: Any, manifest_path: Path | str) -> DataFile:
        """Build from a ``[data.<key>]`` table, validating every field (one-line errors)."""
        where = manifest_path
        name = f"data.{key}"
        if not isinstance(table, Mapping):
            raise BiascheckError(
                where,
                name,
                f"must be a table, got {type(table).__name__}",
                "give path, url and sha256 (a packaged suite shows one: biascheck init NAME copies it)",
            )
        unknown = sorted(set(table) - set(_MANIFEST_KEYS))
        if unknown:
            raise BiascheckError(where, name, f"unknown key {', '.join(map(repr, unknown))}", f"use only: {', '.join(_MANIFEST_KEYS)}")
        optional = table.get("optional", False)
        for field_name in _REQUIRED_KEYS:
            if field_name not in table:
                raise BiascheckError(where, f"{name}.{field_name}", "missing", {"path": _FIX_PATH, "url": _FIX_URL}[field_name])
        for field_name in ("path", "url", *PINS):
            if field_name in table and not isinstance(table[field_name], str):
                raise BiascheckError(where, f"{name}.{field_name}", f"must be a string, got {type(table[field_name]).__name__}", "quote the value")
        if not isinstance(optional, bool):
            raise BiascheckError(where, f"{name}.optional", f"must be true or false, got {optional!r}", "write optional = true or leave it out")
        file = cls(
            key=key,
            path=table["path"],
            url=table.get("url"),
            sha256=table.get("sha256"),
            optional=optional,
            git_blob_sha1=table.get("git_blob_sha1"),
            rows=table.get("rows"),
            rows_left_out=table.get("rows_left_out", 0),
        )
        file.check(manifest_path)
        return file

    def check(self, manifest_path: Path | str) -> None:
        """Raise :class:`BiascheckError` if a field is invalid (done before any file or network access)."""
        name = f"data.{self.key}"
        problem = _path_problem(self.path)
        if problem:
            raise BiascheckError(manifest_path, f"{name}.path", f"{self.path!r} {problem}", _FIX_PATH)
        problem = _url_problem(self.url) if self.url is not None else None
        if problem:
            raise BiascheckError(manifest_path, f"{name}.url", f"{self.url!r} {problem}", _FIX_URL)
        if self.rows_left_out and (self.rows is None or self.rows_left_out > self.rows):
            raise BiascheckError(
                manifest_path,
                f"{name}.rows_left_out",
                f"{self.rows_left_out} is more than the rows declared ({self.rows})",
                "declare rows, the records the file holds, and at most as many left out",
            )
        # An unpinned file (no checksum) is refused where it would be read, unless the run accepts
        # it (resolve's allow_unpinned): the manifest alone cannot say.
        for field_name, value in self.pins.items():
            pattern, fix = PINS[field_name]
            if not pattern.fullmatch(value):
                hint = " (must be lowercase)" if pattern.fullmatch(value.lower()) else ""
                what = "a sha256" if field_name == "sha256" else "a git blob id"
                raise BiascheckError(manifest_path, f"{name}.{field_name}", f"{value!r} is not {what}{hint}", fix)


@dataclass(frozen=True)
class Resolved:
    """Where one :class:`DataFile` was found."""

    file: DataFile
    local: Path | None  # None when missing (optional files only)
    origin: Origin
    reason: str | None = None  # why missing
    # The sha256 of a file the manifest pins by no checksum, read from what was found: its
    # fingerprint part, and what the results record of it.
    content_sha256: str | None = None

    @property
    def missing(self) -> bool:
        return self.local is None

    @property
    def unpinned(self) -> bool:
        return not self.file.pins

    @property
    def pin(self) -> str:
        """The id of the content used: the manifest's pin, else (an unpinned file) its sha256."""
        return self.file.pin or self.content_sha256 or ""


# ---------------------------------------------------------------------------------------------
# hashing

_hash_memo: dict[tuple[str, int, int, int, int, str], str] = {}
_hash_memo_lock = threading.Lock()


def _memo_key(path: Path, st: os.stat_result) -> tuple[str, int, int, int, int]:
    return (os.path.abspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _new_digest(kind: str, size: int) -> Any:
    if kind == "sha256":
        return hashlib.sha256()
    # git's object id of a file: sha1 over a header naming the type and size, then the bytes.
    digest = hashlib.sha1(usedforsecurity=False)
    digest.update(b"blob %d\0" % size)
    return digest


def file_digests(path: Path | str, kinds: Iterable[str]) -> dict[str, str]:
    """The checksums ``kinds`` (names of :data:`PINS`) of a file, lowercase hex, all from one read
    in 1 MiB chunks. Memoised per process on (path, device, inode, size, mtime_ns): an unchanged
    file is hashed once for each kind."""
    path = Path(path)
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        key = _memo_key(path, st)
        with _hash_memo_lock:
            known = {kind: _hash_memo[(*key, kind)] for kind in kinds if (*key, kind) in _hash_memo}
        digests = {kind: _new_digest(kind, st.st_size) for kind in kinds if kind not in known}
        if not digests:
            return known
        buf = bytearray(CHUNK_SIZE)
        view = memoryview(buf)
        while n := fh.readinto(buf):
            for digest in digests.values():
                digest.update(view[:n])
    computed = {kind: digest.hexdigest() for kind, digest in digests.items()}
    with _hash_memo_lock:
        for kind, value in computed.items():
            _hash_memo[(*key, kind)] = value
    return {**known, **computed}


def sha256_file(path: Path | str) -> str:
    """Lowercase hex sha256 of a file (see :func:`file_digests`)."""
    return file_digests(path, ("sha256",))["sha256"]


def git_blob_sha1_file(path: Path | str) -> str:
    """The id git gives a file's content, as ``git hash-object`` prints it (see :func:`file_digests`)."""
    return file_digests(path, ("git_blob_sha1",))["git_blob_sha1"]


def _remember(path: Path, digests: Mapping[str, str]) -> None:
    try:
        key = _memo_key(path, path.stat())
    except OSError:
        return
    with _hash_memo_lock:
        for kind, value in digests.items():
            _hash_memo[(*key, kind)] = value


# Parsed data files, memoised per process as their checksums are (on path and stat), so that a
# process loading suites over the same files again (a notebook, a script running several
# configurations, the tests) parses each file once. Bounded: a long-lived process reading
# many files keeps the most recent.
_PARSED_KEPT = 64
_parsed_memo: collections.OrderedDict[tuple[object, ...], Any] = collections.OrderedDict()
_parsed_memo_lock = threading.Lock()


def parsed_file(path: Path, parse: Callable[..., T], *args: object) -> T:
    """``parse(path, *args)``, once per unchanged file (same path, device, inode, size and mtime)
    and ``args`` (compared by their repr). ``parse`` must be a pure function of the file's bytes and
    ``args`` returning a list of immutable records, or a tuple of such lists and other immutable
    values: each caller gets lists of its own (:func:`_fresh`), so one may extend what it was given.
    A parse that raises is not kept."""
    try:
        st = os.stat(path)
    except OSError:
        return parse(path, *args)  # the parser reports the unreadable file as it always does
    key = (*_memo_key(path, st), parse.__module__, parse.__qualname__, repr(args))
    with _parsed_memo_lock:
        if key in _parsed_memo:
            _parsed_memo.move_to_end(key)
            return _fresh(_parsed_memo[key])
    value = parse(path, *args)
    with _parsed_memo_lock:
        _parsed_memo[key] = value
        while len(_parsed_memo) > _PARSED_KEPT:
            _parsed_memo.popitem(last=False)
    return _fresh(value)


def _fresh(value: Any) -> Any:
    """What a caller of :func:`parsed_file` may extend, copied: the value if a list, the lists among
    a tuple's items. What the lists hold is shared (a parser returns immutable records)."""
    if isinstance(value, list):
        return list(value)
    if isinstance(value, tuple):
        return tuple(list(v) if isinstance(v, list) else v for v in value)
    return value


def _mismatch(file: DataFile, actual: Mapping[str, str]) -> tuple[str, str, str] | None:
    """(field, actual, expected) of the first checksum the file is pinned by that ``actual`` fails."""
    for field_name, expected in file.pins.items():
        if actual[field_name] != expected:
            return field_name, actual[field_name], expected
    return None


def _verify_local(file: DataFile, local: Path, manifest_path: Path | str, where: str) -> None:
    try:
        actual = file_digests(local, file.pins)
    except OSError as exc:
        raise BiascheckError(
            local, None, f"cannot read {file.key!r} from the {where}: {exc.strerror or exc}", "check the file's permissions"
        ) from None
    wrong = _mismatch(file, actual)
    if wrong:
        field_name, got, expected = wrong
        fix = (
            f"replace it with the exact upstream file, or fix {field_name} in the manifest"
            if where == "mirror"
            else f"delete it so it is downloaded again, or fix {field_name} in the manifest"
        )
        raise BiascheckError(local, None, f"{field_name} is {got} but {manifest_path} data.{file.key}.{field_name} expects {expected}", fix)


# ---------------------------------------------------------------------------------------------
# downloading


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("pytest-biascheck")  # the distribution's name, not the import package's
    except (ImportError, PackageNotFoundError):
        pass
    return str(getattr(sys.modules.get("biascheck"), "__version__", None) or "unknown")


def user_agent() -> str:
    return f"biascheck/{_version()}"


class _DownloadFailed(Exception):
    """A network-side failure; ``str()`` is a short human description."""


class _SafeRedirect(urllib.request.HTTPRedirectHandler):
    """Follow redirects only to URLs we would fetch directly (https, or http to loopback)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001
        problem = _url_problem(newurl)
        if problem:
            fp.close()
            raise _DownloadFailed(f"redirected to {newurl}, which {problem}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _opener(url: str) -> urllib.request.OpenerDirector:
    host = urllib.parse.urlsplit(url).hostname or ""
    # Loopback never goes through a proxy from the environment; anything else honours it.
    proxies = urllib.request.ProxyHandler({} if _is_loopback(host) else None)
    return urllib.request.build_opener(proxies, _SafeRedirect)


def _fetch(file: DataFile, manifest_path: Path | str, final: Path, timeout: float, mirror_option: object = MIRROR_OPTION) -> None:
    """Download ``file.url`` to ``final`` atomically; raise _DownloadFailed on network failure.

    A checksum mismatch or a cache that cannot be written is a BiascheckError. Either way no file
    is left at ``final`` (unless one was there already) and the temp file is removed.
    """
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{file.basename}.", suffix=".part", dir=final.parent)
    except OSError as exc:
        raise BiascheckError(
            final.parent, None, f"cannot write to the download cache: {exc.strerror or exc}", "set BIASCHECK_CACHE_DIR to a writable folder"
        ) from None
    tmp = Path(tmp_name)
    done = False
    url = file.url
    assert url is not None, "resolve downloads only a file with a url"
    try:
        received = 0
        request = urllib.request.Request(url, headers={"User-Agent": user_agent()})
        with os.fdopen(fd, "wb") as out:
            try:
                response = _opener(url).open(request, timeout=timeout)
            except urllib.error.HTTPError as exc:
                exc.close()
                raise _DownloadFailed(f"HTTP {exc.code} {exc.reason}") from None
            except urllib.error.URLError as exc:
                reason = exc.reason
                raise _DownloadFailed(str(reason.args[-1] if isinstance(reason, OSError) and reason.args else reason)) from None
            except (OSError, http.client.HTTPException, ValueError) as exc:
                raise _DownloadFailed(_describe(exc)) from None
            with response:
                status = getattr(response, "status", 200)
                if status != 200:
                    raise _DownloadFailed(f"HTTP {status} (expected 200)")
                length_header = response.headers.get("Content-Length")
                expected_length = int(length_header) if length_header and length_header.isdigit() else None
                while True:
                    try:
                        chunk = response.read(CHUNK_SIZE)
                    except (OSError, http.client.HTTPException) as exc:
                        raise _DownloadFailed(f"connection failed after {received} bytes: {_describe(exc)}") from None
                    if not chunk:
                        break
                    received += len(chunk)
                    try:
                        out.write(chunk)
                    except OSError as exc:
                        raise BiascheckError(
                            final.parent,
                            None,
                            f"cannot write to the download cache: {exc.strerror or exc}",
                            "free some disk space or set BIASCHECK_CACHE_DIR to another folder",
                        ) from None
                if expected_length is not None and received != expected_length:
                    raise _DownloadFailed(f"connection closed after {received} of {expected_length} bytes")
            out.flush()
            os.fsync(out.fileno())
        # Read back rather than hashed in flight: a git blob id needs the size before the bytes, and
        # a server need not say it.
        actual = file_digests(tmp, file.pins)
        wrong = _mismatch(file, actual)
        if wrong:
            field_name, got, expected = wrong
            raise BiascheckError(
                manifest_path,
                f"data.{file.key}.{field_name}",
                f"downloaded {file.url} ({received} bytes) has {field_name} {got}, expected {expected}; nothing was saved",
                f"fix {field_name} if the upstream file is right, or {_fix_mirror(mirror_option)}",
            )
        os.chmod(tmp, 0o644)
        os.replace(tmp, final)
        done = True
        _remember(final, actual)
    finally:
        if not done:
            try:
                tmp.unlink()
            except FileNotFoundError:
                pass


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, TimeoutError) or "timed out" in text:
        return "timed out"
    return text


# ---------------------------------------------------------------------------------------------
# resolving


def resolve(
    file: DataFile,
    *,
    manifest_path: Path | str,
    mirror: Path | str | None,
    cache_dir: Path | str,
    offline: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    mirror_option: object = MIRROR_OPTION,
    allow_unpinned: bool = False,
) -> Resolved:
    """Find ``file`` in the mirror, then the cache, then download it (unless ``offline``);
    ``mirror_option``: how the caller names the mirror, for the fix of an error. A file the
    manifest pins by no checksum is read from the mirror alone, and only when ``allow_unpinned``:
    it is never cached or downloaded, since nothing could verify the bytes.

    Returns a verified local path, or (optional files only) ``origin == "missing"`` with the reason:
    the same words a required file's error gives. Raises :class:`BiascheckError` for a checksum
    mismatch, a bad field, or a required file that cannot be had.
    """
    file.check(manifest_path)
    if not file.pins and not allow_unpinned:
        raise BiascheckError(
            manifest_path,
            f"data.{file.key}",
            "has no checksum (neither sha256 nor git_blob_sha1)",
            f"{FIX_PIN}; or, for a dataset of your own, pass {option('allow-unpinned-data')} (the results say so: its numbers compare with no one else's)",
        )
    tried: list[str] = []

    if mirror is not None:
        mirror = Path(mirror)
        if not mirror.is_dir():
            raise BiascheckError(
                mirror,
                None,
                "data mirror folder does not exist",
                f'point {mirror_option} / BIASCHECK_DATA_DIR at the folder holding sources.json (see docs/suites.md, "Data")',
            )
        candidate = mirror / PurePosixPath(file.path)
        if candidate.is_file():
            if not file.pins:
                return Resolved(file, candidate, "mirror", content_sha256=sha256_file(candidate))
            _verify_local(file, candidate, manifest_path, "mirror")
            return Resolved(file, candidate, "mirror")
        # An optional file a mirror lacks is still looked for: a mirror too small for some files
        # (BBQ's five largest) must not make a machine with network access run part of the suite.
        tried.append(f"not in the mirror {mirror} (no {file.path})")
    else:
        tried.append("no mirror given")

    if file.pins:  # the cache is addressed by the pin
        cached = Path(cache_dir) / file.pin / file.basename
        if cached.is_file():
            _verify_local(file, cached, manifest_path, "cache")
            return Resolved(file, cached, "cache")
        tried.append(f"not in the cache ({cached})")
    if not file.pins or file.url is None:  # nothing could verify a download, or nowhere to download from
        why = "it is pinned by no checksum, so it is read from the data folder alone" if not file.pins else "it has no url to download it from"
        problem = f"{file.path} was not found: {'; '.join(tried)}; {why}"
        if file.optional:
            return Resolved(file, None, "missing", problem)
        raise BiascheckError(
            manifest_path, f"data.{file.key}", problem, f"put the file at {file.path} in the data folder ({_fix_mirror(mirror_option)})"
        )

    if offline:
        problem = f"{file.path} was not found: {'; '.join(tried)}; downloads are disabled (offline)"
        if file.optional:
            return Resolved(file, None, "missing", problem)
        raise BiascheckError(manifest_path, f"data.{file.key}", problem, f"{_fix_mirror(mirror_option)} or allow downloads (unset BIASCHECK_OFFLINE)")

    try:
        _fetch(file, manifest_path, cached, timeout, mirror_option)
    except _DownloadFailed as exc:
        tried.append(f"download of {file.url} failed: {exc}")
        problem = f"{file.path} was not found: {'; '.join(tried)}"
        if file.optional:
            return Resolved(file, None, "missing", problem)
        raise BiascheckError(
            manifest_path,
            f"data.{file.key}",
            problem,
            f"{_fix_mirror(mirror_option)} or check network access to {urllib.parse.urlsplit(file.url or '').hostname}",
        ) from None
    return Resolved(file, cached, "download")
