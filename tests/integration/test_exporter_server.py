"""The exporter's HTTP server on loopback: /metrics, /manifest, /healthz, basic auth (bcrypt), TLS."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import bcrypt
import pytest
from aiohttp.test_utils import TestClient, TestServer

from exporter.app import Exporter, ExporterConfig, build_app
from exporter.nvml.fake import FakeNvml
from exporter.nvml.session import NvmlSession
from exporter.webconfig import WebConfigError, load_web_config

ClientFactory = Callable[..., "AsyncIterator[TestClient]"]


def fake_exporter() -> Exporter:
    config = ExporterConfig(collectors=("gpu", "host"), sample_interval_s=0, discover=False)
    return Exporter(config, session=NvmlSession(FakeNvml(2)))


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture
async def client() -> AsyncIterator[TestClient]:
    async with TestClient(TestServer(build_app(fake_exporter()), host="127.0.0.1", port=0)) as test_client:
        yield test_client


async def test_metrics_manifest_healthz(client: TestClient) -> None:
    response = await client.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    text = await response.text()
    assert text.count("DCGM_FI_DEV_GPU_TEMP{") == 2
    assert 'infergauge_collector_success{collector="gpu"} 1.0' in text
    manifest = await (await client.get("/manifest")).json()
    assert [g["index"] for g in manifest["gpus"]] == [0, 1]
    assert manifest["topology"]["interconnect"] == "nvlink"
    assert (await (await client.get("/healthz")).text()) == "ok\n"


def write_web_config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "web.yml"
    path.write_text(body)
    return path


async def test_basic_auth_with_bcrypt_hash(tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode().replace("$2b$", "$2y$")  # htpasswd style
    config = load_web_config(write_web_config(tmp_path, f"basic_auth_users:\n  prom: '{hashed}'\n"))
    app = build_app(fake_exporter(), config)
    async with TestClient(TestServer(app, host="127.0.0.1", port=0)) as test_client:
        assert (await test_client.get("/metrics")).status == 401
        assert (await test_client.get("/metrics", headers=basic("prom", "wrong"))).status == 401
        assert (await test_client.get("/metrics", headers=basic("other", "s3cret"))).status == 401
        ok = await test_client.get("/metrics", headers=basic("prom", "s3cret"))
        assert ok.status == 200
        assert "DCGM_FI_DEV_FB_USED" in await ok.text()


def make_cert(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


async def test_tls_from_web_config(tmp_path: Path) -> None:
    make_cert(tmp_path)
    config = load_web_config(
        write_web_config(tmp_path, "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n")
    )
    context = config.ssl_context()
    assert context is not None
    server = TestServer(build_app(fake_exporter(), config), host="127.0.0.1", port=0)
    await server.start_server(ssl=context)
    try:
        client_context = ssl.create_default_context(cafile=str(tmp_path / "tls.crt"))
        client_context.check_hostname = False
        async with aiohttp.ClientSession() as session:
            async with session.get(
                f"https://127.0.0.1:{server.port}/healthz", ssl=client_context
            ) as response:
                assert response.status == 200
            with pytest.raises(aiohttp.ClientError):
                async with session.get(f"http://127.0.0.1:{server.port}/healthz") as response:
                    await response.read()
    finally:
        await server.close()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("tls_server_config:\n  cert_file: nope.crt\n  key_file: nope.key\n", "does not exist"),
        ("basic_auth_users:\n  prom: plaintext\n", "not a bcrypt hash"),
        ("basic_auth: {}\n", "unknown web config key 'basic_auth'"),
        ("tls_server_config:\n  cert_file: a.crt\n", "needs key_file"),
    ],
)
def test_bad_web_config_names_the_problem(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(WebConfigError, match=message):
        load_web_config(write_web_config(tmp_path, body))


def test_manifest_is_valid_json_without_gpus() -> None:
    exporter = Exporter(ExporterConfig(collectors=("host",), discover=False))
    manifest = json.loads(exporter.manifest_json())
    assert manifest["gpus"] == []
    assert manifest["engines"] == []
