"""biascheck.config.sources: mirror -> cache -> download, always verified by the checksums a file
is pinned by (sha256, git blob id, or both).

Downloads go to a real loopback HTTP server serving small generated files (never benchmark data).
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import json
import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.config import sources
from biascheck.config.manifest import load_manifest
from biascheck.config.sources import DataFile, Resolved, git_blob_sha1_file, resolve, sha256_file
from biascheck.core.errors import BiascheckError

from conftest import SUITES, mirror_or_skip

MANIFEST = Path("suites/test/suite.toml")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def blob(data: bytes) -> str:
    """The id git gives ``data``, computed here the way git documents it."""
    return hashlib.sha1(b"blob " + str(len(data)).encode() + b"\0" + data).hexdigest()


# ---------------------------------------------------------------------------------------------
# loopback server


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802
        state: Server = self.server.state  # type: ignore[attr-defined]
        with state.lock:
            state.requests.append((self.path, self.headers.get("User-Agent", "")))
        route = state.routes.get(self.path)
        if route is None:
            self._send(404, b"not found")
            return
        kind, payload = route
        if kind == "body":
            self._send(200, payload)
        elif kind == "status":
            self._send(payload, b"error page")
        elif kind == "redirect":
            self.send_response(302)
            self.send_header("Location", payload)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif kind == "drop":  # promise the whole body, send half, close the connection
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload[: len(payload) // 2])
            self.wfile.flush()
            self.close_connection = True
        elif kind == "hang":  # never answer (until teardown)
            state.release.wait(10)
            self.close_connection = True

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


class Server:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.requests: list[tuple[str, str]] = []
        self.routes: dict[str, tuple[str, object]] = {}
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.state = self  # type: ignore[attr-defined]
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def serve(self, path: str, kind: str, payload: object = b"") -> str:
        self.routes[path] = (kind, payload)
        return self.base + path

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.requests)


@pytest.fixture
def server():
    srv = Server()
    thread = threading.Thread(target=srv.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.release.set()
        srv.httpd.shutdown()
        srv.httpd.server_close()
        thread.join(5)


@pytest.fixture
def no_external_network(monkeypatch):
    """Fail the test if anything tries to connect anywhere but loopback."""
    real = socket.create_connection

    def guarded(address, *args, **kwargs):
        host = address[0]
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"network touched: {address}")
        return real(address, *args, **kwargs)

    def no_dns(host, *args, **kwargs):
        raise AssertionError(f"DNS lookup of {host}")

    monkeypatch.setattr(socket, "create_connection", guarded)
    monkeypatch.setattr(
        socket,
        "getaddrinfo",
        lambda host, *a, **k: no_dns(host) if host not in ("127.0.0.1", "::1", "localhost") else real_getaddrinfo(host, *a, **k),
    )


real_getaddrinfo = socket.getaddrinfo


@pytest.fixture
def dirs(tmp_path):
    mirror = tmp_path / "mirror"
    cache = tmp_path / "cache"
    mirror.mkdir()
    return mirror, cache


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def make(key: str, path: str, url: str, data: bytes, optional: bool = False) -> DataFile:
    return DataFile(key=key, path=path, url=url, sha256=sha(data), optional=optional)


def make_blob(key: str, path: str, url: str, data: bytes, optional: bool = False) -> DataFile:
    """Pinned by its git blob id alone, as a file too large for the mirror is."""
    return DataFile(key=key, path=path, url=url, sha256=None, optional=optional, git_blob_sha1=blob(data))


def put(root: Path, rel: str, data: bytes) -> Path:
    target = root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


# ---------------------------------------------------------------------------------------------
# mirror and cache


def test_mirror_hit_makes_no_request(server, dirs):
    mirror, cache = dirs
    data = b"id\tcontext\n1\tkimchi\n"
    url = server.serve("/samples.tsv", "body", data)
    local = put(mirror, "kobbq/samples.tsv", data)
    got = resolve(make("samples", "kobbq/samples.tsv", url, data), manifest_path=MANIFEST, mirror=mirror, cache_dir=cache)
    assert got == Resolved(got.file, local, "mirror")
    assert not got.missing
    assert server.count == 0
    assert not cache.exists()  # a mirror hit never creates the cache


def test_mirror_file_with_wrong_hash_is_one_line_error(server, dirs):
    mirror, cache = dirs
    data = b"right content\n"
    local = put(mirror, "bbq/Age.jsonl", b"tampered content\n")
    url = server.serve("/Age.jsonl", "body", data)
    with pytest.raises(BiascheckError) as info:
        resolve(make("Age", "bbq/Age.jsonl", url, data), manifest_path=MANIFEST, mirror=mirror, cache_dir=cache)
    message = str(info.value)
    assert "\n" not in message
    assert str(local) in message
    assert sha(data) in message and sha(b"tampered content\n") in message
    assert "fix sha256" in message
    assert server.count == 0


def test_cache_hit_makes_no_request(server, dirs):
    _, cache = dirs
    data = b"cached bytes"
    url = server.serve("/x/prompts.tsv", "body", data)
    local = put(cache, f"{sha(data)}/prompts.tsv", data)
    got = resolve(make("prompts", "kobbq/prompts.tsv", url, data), manifest_path=MANIFEST, mirror=None, cache_dir=cache)
    assert (got.origin, got.local) == ("cache", local)
    assert server.count == 0


def test_corrupt_cache_entry_is_an_error(server, dirs):
    _, cache = dirs
    data = b"good"
    local = put(cache, f"{sha(data)}/f.txt", b"bad!")
    url = server.serve("/f.txt", "body", data)
    with pytest.raises(BiascheckError, match="delete it so it is downloaded again") as info:
        resolve(make("f", "d/f.txt", url, data), manifest_path=MANIFEST, mirror=None, cache_dir=cache)
    assert str(local) in str(info.value)
    assert server.count == 0


def test_missing_mirror_folder_is_an_error(server, tmp_path):
    data = b"x"
    url = server.serve("/x", "body", data)
    with pytest.raises(BiascheckError, match="mirror folder does not exist"):
        resolve(make("x", "a/x", url, data), manifest_path=MANIFEST, mirror=tmp_path / "nope", cache_dir=tmp_path / "c")
    assert server.count == 0


# ---------------------------------------------------------------------------------------------
# downloads


def test_download_is_verified_cached_then_hit_from_cache(server, dirs):
    mirror, cache = dirs
    data = os.urandom(3 * sources.CHUNK_SIZE + 123)  # several chunks
    url = server.serve("/big.jsonl", "body", data)
    file = make("big", "bbq/big.jsonl", url, data)

    first = resolve(file, manifest_path=MANIFEST, mirror=mirror, cache_dir=cache)
    assert first.origin == "download"
    assert first.local == cache / sha(data) / "big.jsonl"
    assert first.local.read_bytes() == data
    assert files_under(cache) == [first.local]  # no temp file left
    assert server.count == 1
    path, agent = server.requests[0]
    assert path == "/big.jsonl" and agent.startswith("biascheck/")

    second = resolve(file, manifest_path=MANIFEST, mirror=mirror, cache_dir=cache)
    assert (second.origin, second.local) == ("cache", first.local)
    assert server.count == 1


def test_download_with_wrong_content_leaves_nothing(server, dirs):
    _, cache = dirs
    expected = b"what the manifest pinned"
    url = server.serve("/f.tsv", "body", b"what the server sends")
    with pytest.raises(BiascheckError) as info:
        resolve(make("f", "k/f.tsv", url, expected), manifest_path=MANIFEST, mirror=None, cache_dir=cache)
    message = str(info.value)
    assert "\n" not in message
    assert sha(expected) in message and sha(b"what the server sends") in message
    assert "data.f.sha256" in message and str(MANIFEST) in message
    assert files_under(cache) == []


@pytest.mark.parametrize(
    ("kind", "payload", "expect"),
    [
        ("status", 404, "HTTP 404"),
        ("status", 500, "HTTP 500"),
        ("drop", b"0123456789" * 100, "connection closed after 500 of 1000 bytes"),
        ("hang", b"", "timed out"),
    ],
)
def test_failed_download_of_required_file_is_clear_and_leaves_nothing(server, dirs, kind, payload, expect):
    mirror, cache = dirs
    url = server.serve("/data.jsonl", kind, payload)
    file = make("Age", "bbq/data.jsonl", url, b"0123456789" * 100)
    with pytest.raises(BiascheckError) as info:
        resolve(file, manifest_path=MANIFEST, mirror=mirror, cache_dir=cache, timeout=0.5)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{MANIFEST}: data.Age: ")
    assert expect in message
    assert url in message
    assert f"not in the mirror {mirror}" in message and "not in the cache" in message
    assert "--biascheck-data" in message
    assert files_under(cache) == []


def test_failed_download_of_optional_file_is_missing(server, tmp_path):
    url = server.serve("/Gender_identity.jsonl", "status", 404)
    file = make("Gender_identity", "bbq/Gender_identity.jsonl", url, b"whatever", optional=True)
    got = resolve(file, manifest_path=MANIFEST, mirror=None, cache_dir=tmp_path / "cache")
    assert (got.origin, got.local, got.missing) == ("missing", None, True)
    assert "Gender_identity.jsonl" in got.reason and "HTTP 404" in got.reason
    assert files_under(tmp_path / "cache") == []


def test_redirect_to_plain_http_elsewhere_is_refused(server, dirs, no_external_network):
    _, cache = dirs
    url = server.serve("/moved", "redirect", "http://example.com/file.tsv")
    with pytest.raises(BiascheckError, match="redirected to http://example.com/file.tsv"):
        resolve(make("f", "k/file.tsv", url, b"x"), manifest_path=MANIFEST, mirror=None, cache_dir=cache)
    assert files_under(cache) == []


def test_redirect_within_loopback_is_followed(server, dirs):
    _, cache = dirs
    data = b"moved content"
    server.serve("/new", "body", data)
    url = server.serve("/old", "redirect", server.base + "/new")
    got = resolve(make("f", "k/f", url, data), manifest_path=MANIFEST, mirror=None, cache_dir=cache)
    assert got.origin == "download" and got.local.read_bytes() == data
    assert [p for p, _ in server.requests] == ["/old", "/new"]


# ---------------------------------------------------------------------------------------------
# offline and optional files


def test_offline_required_file_is_an_error_without_request(server, dirs):
    mirror, cache = dirs
    data = b"abc"
    url = server.serve("/a.tsv", "body", data)
    with pytest.raises(BiascheckError) as info:
        resolve(make("a", "k/a.tsv", url, data), manifest_path=MANIFEST, mirror=mirror, cache_dir=cache, offline=True)
    message = str(info.value)
    assert message.startswith(f"{MANIFEST}: data.a: ")
    assert "not in the mirror" in message and "not in the cache" in message
    assert "downloads are disabled" in message
    assert 'point --biascheck-data at a mirror folder (see docs/suites.md, "Data") or allow downloads' in message
    assert server.count == 0


def test_offline_still_uses_mirror_and_cache(server, dirs):
    mirror, cache = dirs
    a, b = b"in mirror", b"in cache"
    put(mirror, "k/a", a)
    put(cache, f"{sha(b)}/b", b)
    url = server.serve("/unused", "body", b"")
    kw = dict(manifest_path=MANIFEST, mirror=mirror, cache_dir=cache, offline=True)
    assert resolve(make("a", "k/a", url, a), **kw).origin == "mirror"
    assert resolve(make("b", "k/b", url, b), **kw).origin == "cache"
    assert server.count == 0


def test_offline_optional_file_without_mirror_is_missing(server, tmp_path):
    url = server.serve("/o", "body", b"o")
    got = resolve(make("o", "k/o.jsonl", url, b"o", optional=True), manifest_path=MANIFEST, mirror=None, cache_dir=tmp_path / "cache", offline=True)
    assert got.origin == "missing" and "downloads are disabled" in got.reason
    assert server.count == 0


def test_optional_file_absent_from_mirror_is_downloaded_by_its_blob_id_else_missing(server, dirs):
    # Decision (issue 24, part 1): a mirror too small for a file does not decide that the file does
    # not exist. The cache, then the pinned URL, are tried; only when neither has it is it missing.
    mirror, cache = dirs
    data = b'{"example_id": 0}\n'
    url = server.serve("/Gender_identity.jsonl", "body", data)
    file = make_blob("Gender_identity", "bbq/Gender_identity.jsonl", url, data, optional=True)
    offline = resolve(file, manifest_path=MANIFEST, mirror=mirror, cache_dir=cache, offline=True)
    assert (offline.origin, offline.local) == ("missing", None) and server.count == 0
    assert offline.reason.startswith(f"bbq/Gender_identity.jsonl was not found: not in the mirror {mirror}")
    assert "downloads are disabled" in offline.reason and "\n" not in offline.reason
    got = resolve(file, manifest_path=MANIFEST, mirror=mirror, cache_dir=cache)
    assert (got.origin, got.local) == ("download", cache / blob(data) / "Gender_identity.jsonl")
    assert resolve(file, manifest_path=MANIFEST, mirror=mirror, cache_dir=cache, offline=True).origin == "cache"
    assert server.count == 1


def test_optional_file_present_in_mirror_is_used(server, dirs):
    mirror, cache = dirs
    data = b"present"
    local = put(mirror, "bbq/Age.jsonl", data)
    got = resolve(make("Age", "bbq/Age.jsonl", server.base + "/Age", data, optional=True), manifest_path=MANIFEST, mirror=mirror, cache_dir=cache)
    assert (got.origin, got.local, got.reason) == ("mirror", local, None)


def test_required_file_absent_from_mirror_is_downloaded(server, dirs):
    mirror, cache = dirs
    data = b"not mirrored"
    url = server.serve("/n", "body", data)
    got = resolve(make("n", "k/n.tsv", url, data), manifest_path=MANIFEST, mirror=mirror, cache_dir=cache)
    assert got.origin == "download" and server.count == 1


# ---------------------------------------------------------------------------------------------
# validation


GOOD = {
    "path": "kobbq/KoBBQ_test_samples.tsv",
    "url": "https://raw.githubusercontent.com/naver-ai/KoBBQ/0dd165aeaaacd1bd46c63513a9b2e9875eb6dce7/data/x.tsv",
    "sha256": "a" * 64,
}


def test_from_manifest_accepts_a_good_table():
    file = DataFile.from_manifest("samples", {**GOOD, "optional": True, "category": "Age"}, MANIFEST)
    assert file == DataFile("samples", GOOD["path"], GOOD["url"], GOOD["sha256"], True)
    assert DataFile.from_manifest("samples", GOOD, MANIFEST).optional is False
    both = DataFile.from_manifest("samples", {**GOOD, "git_blob_sha1": "b" * 40}, MANIFEST)
    assert both.pins == {"sha256": "a" * 64, "git_blob_sha1": "b" * 40} and both.pin == "a" * 64
    by_blob = DataFile.from_manifest("samples", {"path": GOOD["path"], "url": GOOD["url"], "git_blob_sha1": "b" * 40}, MANIFEST)
    assert by_blob.pins == {"git_blob_sha1": "b" * 40} and by_blob.pin == "b" * 40


@pytest.mark.parametrize("optional", [False, True])
def test_a_file_pinned_by_no_checksum_is_refused_unless_the_run_accepts_it(optional, tmp_path):
    # Bytes no checksum pins cannot be verified: such a file is refused where it would be read,
    # with the fix, optional or not; a run that accepts it (a dataset of the user's own) reads it
    # from the data folder alone, and the sha256 of what it read stands for its pin.
    table = {"path": GOOD["path"], "url": GOOD["url"], "optional": optional}
    file = DataFile.from_manifest("samples", table, MANIFEST)
    mirror = tmp_path / "mirror"
    (mirror / "kobbq").mkdir(parents=True)
    (mirror / GOOD["path"]).write_bytes(b"mine\n")
    with pytest.raises(BiascheckError) as info:
        resolve(file, manifest_path=MANIFEST, mirror=mirror, cache_dir=tmp_path / "cache", offline=True)
    message = str(info.value)
    assert message.startswith(f"{MANIFEST}: data.samples: has no checksum (neither sha256 nor git_blob_sha1); ")
    assert "git_blob_sha1 (40" in message and "sources.json" in message and "--biascheck-allow-unpinned-data" in message and "\n" not in message
    got = resolve(file, manifest_path=MANIFEST, mirror=mirror, cache_dir=tmp_path / "cache", offline=True, allow_unpinned=True)
    assert got.unpinned and got.origin == "mirror" and got.content_sha256 == hashlib.sha256(b"mine\n").hexdigest() == got.pin
    # Never downloaded or cached: nothing could verify the bytes.
    elsewhere = tmp_path / "empty"
    elsewhere.mkdir()
    if optional:
        missing = resolve(file, manifest_path=MANIFEST, mirror=elsewhere, cache_dir=tmp_path / "cache", allow_unpinned=True)
        assert missing.missing and "pinned by no checksum, so it is read from the data folder alone" in (missing.reason or "")
    else:
        with pytest.raises(BiascheckError, match="pinned by no checksum, so it is read from the data folder alone"):
            resolve(file, manifest_path=MANIFEST, mirror=elsewhere, cache_dir=tmp_path / "cache", allow_unpinned=True)


def test_a_pinned_file_without_a_url_is_read_from_the_folder_and_the_cache_never_downloaded(tmp_path):
    file = DataFile.from_manifest("samples", {"path": GOOD["path"], "sha256": hashlib.sha256(b"x\n").hexdigest()}, MANIFEST)
    assert file.url is None
    with pytest.raises(
        BiascheckError, match=r"data\.samples: \S+ was not found: no mirror given; not in the cache .*; it has no url to download it from"
    ):
        resolve(file, manifest_path=MANIFEST, mirror=None, cache_dir=tmp_path / "cache")
    mirror = tmp_path / "mirror"
    (mirror / "kobbq").mkdir(parents=True)
    (mirror / GOOD["path"]).write_bytes(b"x\n")
    assert resolve(file, manifest_path=MANIFEST, mirror=mirror, cache_dir=tmp_path / "cache").origin == "mirror"


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/f", "http://127.9.9.9/f", "http://[::1]:1/f", "http://localhost/f"])
def test_plain_http_is_allowed_to_loopback(url):
    assert DataFile.from_manifest("k", {**GOOD, "url": url}, MANIFEST).url == url


@pytest.mark.parametrize(
    ("change", "field", "needle"),
    [
        ({"sha256": "abc"}, "sha256", "is not a sha256"),
        ({"sha256": "A" * 64}, "sha256", "must be lowercase"),
        ({"sha256": "g" * 64}, "sha256", "is not a sha256"),
        ({"sha256": 7}, "sha256", "must be a string"),
        ({"git_blob_sha1": "abc"}, "git_blob_sha1", "is not a git blob id"),
        ({"git_blob_sha1": "A" * 40}, "git_blob_sha1", "must be lowercase"),
        ({"git_blob_sha1": "a" * 64}, "git_blob_sha1", "is not a git blob id"),
        ({"git_blob_sha1": ["a" * 40]}, "git_blob_sha1", "must be a string"),
        ({"path": "../secrets/x.tsv"}, "path", "contains '..'"),
        ({"path": "kobbq/../../x.tsv"}, "path", "contains '..'"),
        ({"path": "/etc/passwd"}, "path", "is absolute"),
        ({"path": "kobbq\\x.tsv"}, "path", "backslash"),
        ({"path": ""}, "path", "is empty"),
        ({"url": "ftp://example.com/x.tsv"}, "url", "uses scheme 'ftp'"),
        ({"url": "http://example.com/x.tsv"}, "url", "plain http to a non-loopback host"),
        ({"url": "http://128.0.0.1/x.tsv"}, "url", "plain http to a non-loopback host"),
        ({"url": "https:///x.tsv"}, "url", "has no host"),
        ({"url": "example.com/x.tsv"}, "url", "has no scheme"),
        ({"url": 3}, "url", "must be a string"),
        ({"optional": "yes"}, "optional", "must be true or false"),
    ],
)
def test_from_manifest_rejects_bad_fields(change, field, needle):
    table = {**GOOD, **change}
    table = {k: v for k, v in table.items() if v is not None}
    with pytest.raises(BiascheckError) as info:
        DataFile.from_manifest("samples", table, MANIFEST)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{MANIFEST}: data.samples.{field}: ")
    assert needle in message
    assert info.value.fix


def test_from_manifest_rejects_unknown_keys_and_non_tables():
    with pytest.raises(BiascheckError, match=r"data\.samples: unknown key 'optinal'"):
        DataFile.from_manifest("samples", {**GOOD, "optinal": True}, MANIFEST)
    with pytest.raises(BiascheckError, match=r"data\.samples: must be a table"):
        DataFile.from_manifest("samples", "https://x", MANIFEST)


def test_non_loopback_http_is_refused_before_any_network(tmp_path, no_external_network):
    file = DataFile("f", "k/f.tsv", "http://example.com/f.tsv", "b" * 64)
    with pytest.raises(BiascheckError, match=r"data\.f\.url: .*plain http to a non-loopback host"):
        resolve(file, manifest_path=MANIFEST, mirror=None, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_resolve_revalidates_a_hand_built_path(tmp_path, no_external_network):
    (tmp_path / "m").mkdir()
    (tmp_path / "secret").write_bytes(b"s")
    file = DataFile("f", "../secret", "https://example.com/f", sha(b"s"))
    with pytest.raises(BiascheckError, match=r"data\.f\.path: .*contains '\.\.'"):
        resolve(file, manifest_path=MANIFEST, mirror=tmp_path / "m", cache_dir=tmp_path / "cache")


# ---------------------------------------------------------------------------------------------
# hashing


def test_sha256_file_chunks_and_memoises(tmp_path, monkeypatch):
    data = os.urandom(2 * sources.CHUNK_SIZE + 7)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    expected, expected_more = sha(data), sha(data + b"more")
    calls = []
    real = sources.hashlib.sha256

    def counting(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(sources.hashlib, "sha256", counting)
    assert sha256_file(path) == expected
    assert sha256_file(path) == expected
    assert len(calls) == 1  # the unchanged file was hashed once
    path.write_bytes(data + b"more")  # size changes -> hashed again
    assert sha256_file(path) == expected_more
    assert len(calls) == 2


# ---------------------------------------------------------------------------------------------
# the real mirror (../shared/datasets from the project root, named by BIASCHECK_DATA_DIR)


def test_real_mirror_kobbq_license(tmp_path, no_external_network):
    env = os.environ.get("BIASCHECK_DATA_DIR")
    if not env:
        pytest.skip("BIASCHECK_DATA_DIR is not set; point it at the data mirror (e.g. ../shared/datasets) to run this")
    mirror = Path(env).expanduser()
    entry = {
        "local": "LICENSE",
        "raw_url": "https://raw.githubusercontent.com/naver-ai/KoBBQ/0dd165aeaaacd1bd46c63513a9b2e9875eb6dce7/LICENSE",
        "bytes": 1078,
        "sha256": "a09774bc173cad4312010ebabf3bac57ad88c1ed99fde5c204d61f40dec48e64",
    }
    listed = json.loads((mirror / "sources.json").read_text("utf-8"))
    assert entry in [{k: f[k] for k in entry} for f in listed["kobbq"]["files"]]
    file = DataFile.from_manifest("license", {"path": "kobbq/LICENSE", "url": entry["raw_url"], "sha256": entry["sha256"]}, MANIFEST)
    got = resolve(file, manifest_path=MANIFEST, mirror=mirror, cache_dir=tmp_path / "cache", offline=True)
    assert got.origin == "mirror"
    assert got.local.stat().st_size == entry["bytes"]


# ---------------------------------------------------------------------------------------------
# git blob ids (issue 24, part 1)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=3000) | st.sampled_from([b"", b"\0", b"blob 0\0", b"\r\n" * 10]))
def test_the_blob_id_of_any_bytes_is_the_one_git_gives_them(tmp_path, data):
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    # --no-filters: the bytes as they are, whatever the user's git configuration does to line ends.
    git = subprocess.run(["git", "hash-object", "--no-filters", str(path)], capture_output=True, text=True, check=True)
    assert git_blob_sha1_file(path) == git.stdout.strip() == blob(data)
    assert sources.file_digests(path, ("sha256", "git_blob_sha1")) == {"sha256": sha(data), "git_blob_sha1": blob(data)}


def test_download_pinned_by_blob_id_is_verified_and_cached_under_it(server, dirs):
    _, cache = dirs
    data = os.urandom(2 * sources.CHUNK_SIZE + 5)
    url = server.serve("/Race_x_SES.jsonl", "body", data)
    file = make_blob("Race_x_SES", "bbq/Race_x_SES.jsonl", url, data, optional=True)
    got = resolve(file, manifest_path=MANIFEST, mirror=None, cache_dir=cache)
    assert got.origin == "download" and got.local == cache / blob(data) / "Race_x_SES.jsonl"
    assert got.local.read_bytes() == data and files_under(cache) == [got.local]
    again = resolve(file, manifest_path=MANIFEST, mirror=None, cache_dir=cache)
    assert (again.origin, again.local, server.count) == ("cache", got.local, 1)


def test_download_with_another_blob_id_is_refused_and_leaves_nothing(server, dirs):
    _, cache = dirs
    pinned, sent = b"what the tree at the pinned commit holds\n", b"what the server sends instead!!!\n"
    url = server.serve("/SES.jsonl", "body", sent)
    # Optional or not: a wrong file is an error, never a "missing" category.
    file = make_blob("SES", "bbq/SES.jsonl", url, pinned, optional=True)
    with pytest.raises(BiascheckError) as info:
        resolve(file, manifest_path=MANIFEST, mirror=None, cache_dir=cache)
    message = str(info.value)
    assert message.startswith(f"{MANIFEST}: data.SES.git_blob_sha1: downloaded {url} ({len(sent)} bytes) has git_blob_sha1 {blob(sent)}, ")
    assert f"expected {blob(pinned)}; nothing was saved; fix git_blob_sha1 if the upstream file is right" in message
    assert "\n" not in message and files_under(cache) == []


@pytest.mark.parametrize("wrong", ["sha256", "git_blob_sha1"])
def test_a_file_pinned_by_both_must_match_both(server, dirs, wrong):
    mirror, cache = dirs
    data = b"the file\n"
    local = put(mirror, "bbq/Age.jsonl", data)
    file = DataFile("Age", "bbq/Age.jsonl", server.base + "/Age", sha(data), git_blob_sha1=blob(data))
    assert resolve(file, manifest_path=MANIFEST, mirror=mirror, cache_dir=cache).origin == "mirror"
    file = dataclasses.replace(file, **{wrong: sha(b"other") if wrong == "sha256" else blob(b"other")})
    with pytest.raises(BiascheckError) as info:
        resolve(file, manifest_path=MANIFEST, mirror=mirror, cache_dir=cache)
    assert str(info.value).startswith(f"{local}: {wrong} is ")
    assert f"but {MANIFEST} data.Age.{wrong} expects" in str(info.value) and f"fix {wrong} in the manifest" in str(info.value)
    assert server.count == 0


def test_a_corrupt_cache_entry_pinned_by_blob_id_is_refused(server, dirs):
    _, cache = dirs
    data = b"good bytes"
    local = put(cache, f"{blob(data)}/f.jsonl", b"evil bytes")  # same size: only the id tells them apart
    file = make_blob("f", "bbq/f.jsonl", server.serve("/f", "body", data), data)
    with pytest.raises(BiascheckError) as info:
        resolve(file, manifest_path=MANIFEST, mirror=None, cache_dir=cache)
    assert str(info.value) == (
        f"{local}: git_blob_sha1 is {blob(b'evil bytes')} but {MANIFEST} data.f.git_blob_sha1 expects {blob(data)}; "
        "delete it so it is downloaded again, or fix git_blob_sha1 in the manifest"
    )
    assert server.count == 0


def _bbq_sources() -> dict[str, dict]:
    listed = json.loads((mirror_or_skip() / "sources.json").read_text("utf-8"))["bbq"]["files"]
    return {entry["local"]: entry for entry in listed if entry["local"].endswith(".jsonl")}


@pytest.mark.data
def test_every_bbq_file_is_pinned_as_sources_json_records_it():
    listed = _bbq_sources()
    data = load_manifest(SUITES / "bbq").data
    assert len(data) == len(listed) == 11
    for file in data.values():
        entry = listed[file.basename]
        assert (file.url, file.git_blob_sha1, file.sha256) == (entry["raw_url"], entry["git_blob_sha1"], entry.get("sha256"))
        assert file.optional and entry.get("mirrored", True) == ("sha256" in entry)


@pytest.mark.data
def test_the_mirrored_bbq_files_are_verified_by_their_blob_id_and_a_changed_byte_is_refused(tmp_path, no_external_network):
    mirror = mirror_or_skip()
    mirrored = {name: entry for name, entry in _bbq_sources().items() if entry.get("mirrored", True)}
    assert len(mirrored) == 6
    suite = load_manifest(SUITES / "bbq")
    for name, entry in mirrored.items():
        data = (mirror / "bbq" / name).read_bytes()
        assert blob(data) == entry["git_blob_sha1"], name  # the mirror holds the bytes of the pinned commit
        # Pinned by the blob id alone, as the five unmirrored files are: the mirror's copy is used...
        file = dataclasses.replace(suite.data[name.removesuffix(".jsonl")], sha256=None)
        got = resolve(file, manifest_path=MANIFEST, mirror=mirror, cache_dir=tmp_path / "cache", offline=True)
        assert (got.origin, got.local) == ("mirror", mirror / "bbq" / name)
        # ... and a copy with one byte changed (same size) is refused by the blob id check.
        corrupted = bytearray(data)
        corrupted[len(data) // 2] ^= 0x01
        copy = put(tmp_path / "corrupt", f"bbq/{name}", bytes(corrupted))
        with pytest.raises(BiascheckError) as info:
            resolve(file, manifest_path=MANIFEST, mirror=tmp_path / "corrupt", cache_dir=tmp_path / "cache", offline=True)
        assert str(info.value) == (
            f"{copy}: git_blob_sha1 is {blob(bytes(corrupted))} but {MANIFEST} data.{file.key}.git_blob_sha1 expects {entry['git_blob_sha1']}; "
            "replace it with the exact upstream file, or fix git_blob_sha1 in the manifest"
        )


def _counted_parse(calls: list[str]):
    def parse(path: Path, suffix: str = "") -> tuple[list[str], int]:
        calls.append(suffix)
        if path.read_text("utf-8").startswith("bad"):
            raise BiascheckError(path, None, "is bad", "fix it")
        lines = path.read_text("utf-8").split()
        return [line + suffix for line in lines], len(lines)

    return parse


def test_a_file_is_parsed_once_until_it_changes_and_each_caller_gets_lists_of_its_own(tmp_path):
    path, calls = tmp_path / "rows.txt", []
    parse = _counted_parse(calls)
    path.write_text("a b", "utf-8")
    first = sources.parsed_file(path, parse)
    first[0].append("mine")  # a caller extending what it was given changes no later caller's
    assert sources.parsed_file(path, parse) == (["a", "b"], 2) and calls == [""]
    assert sources.parsed_file(path, parse, "!") == (["a!", "b!"], 2) and calls == ["", "!"]  # other arguments: parsed again
    os.utime(path, ns=(1, 1))  # a file touched is read again, whatever its size
    path.write_text("c d", "utf-8")
    os.utime(path, ns=(2, 2))
    assert sources.parsed_file(path, parse) == (["c", "d"], 2) and calls == ["", "!", ""]


def test_a_parse_that_fails_is_not_kept_and_fails_again(tmp_path):
    path, calls = tmp_path / "rows.txt", []
    path.write_text("bad", "utf-8")
    for _ in range(2):
        with pytest.raises(BiascheckError, match="is bad"):
            sources.parsed_file(path, _counted_parse(calls))
    assert len(calls) == 2
    with pytest.raises(FileNotFoundError):  # a missing file is the parser's to report, as without the memo
        sources.parsed_file(tmp_path / "none.txt", lambda p: p.read_text("utf-8"))


RECORDS = st.lists(st.tuples(st.integers(), st.text(max_size=2)), max_size=4)  # a parser's immutable records


@given(RECORDS | st.tuples(RECORDS, st.integers()) | st.tuples(RECORDS, RECORDS))
def test_what_the_memo_hands_out_equals_what_was_parsed_with_lists_of_its_own(value):
    fresh = sources._fresh(value)
    assert fresh == value and type(fresh) is type(value)
    mine = [fresh] if isinstance(fresh, list) else [v for v in fresh if isinstance(v, list)]
    kept = [value] if isinstance(value, list) else [v for v in value if isinstance(v, list)]
    assert len(mine) == len(kept) and all(a is not b for a, b in zip(mine, kept))
    for a, b in zip(mine, kept):
        a.append((0, "extended"))
        assert len(a) == len(b) + 1  # extending a caller's list leaves the memo's as parsed
        assert all(x is y for x, y in zip(a, b))  # the records themselves are shared, not copied
