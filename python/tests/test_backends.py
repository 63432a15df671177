"""mixrt.backends: the registry's report from Python, as `mixrt info`."""

import subprocess
import sys

import pytest

import mixrt


def test_info_lists_the_loaded_plugins_and_their_capabilities():
    info = mixrt.backends.info()
    names = [p.get("backend") or p.get("name") for p in info["plugins"]]
    assert "cpu" in str(info) and "reference" in str(info), names
    assert mixrt.backends.list()  # At least one usable backend.
    assert mixrt.backends.current().startswith(mixrt.backends.list()[0])


def test_selecting_an_unknown_backend_names_what_exists():
    with pytest.raises(Exception) as raised:
        mixrt.backends.select("no-such-backend")
    assert "no-such-backend" in str(raised.value)


def test_select_reference_then_back():
    mixrt.backends.select("reference")
    try:
        assert mixrt.backends.current().startswith("reference")
        assert (mixrt.ones(2) + 1).tolist() == [2.0, 2.0]
    finally:
        mixrt.backends.select(mixrt.backends.list()[0])


def test_python_dash_m_mixrt_info_runs_the_cli():
    out = subprocess.run([sys.executable, "-m", "mixrt", "info"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "cpu" in out.stdout


def test_plugins_run_out_of_process_when_asked():
    code = ("import mixrt; "
            "p = [p for p in mixrt.backends.info()['plugins'] "
            "if p['name'] == 'cpu'][0]; "
            "print(p['out_of_process'], (mixrt.ones(3) * 2).tolist())")
    env = dict(__import__("os").environ, MIXRT_PLUGIN_ISOLATION="cpu")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True [2.0, 2.0, 2.0]"
