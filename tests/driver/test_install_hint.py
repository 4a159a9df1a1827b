"""Install hints work where vyre runs: from a clone (an editable install, as `make` makes) the
Fix names the clone; from a release it names the PyPI extra."""

from __future__ import annotations

import json

from vyre.driver import install


def test_an_editable_install_is_told_to_install_from_its_clone(monkeypatch, tmp_path):
    class Dist:
        def read_text(self, name):
            assert name == "direct_url.json"
            return json.dumps({"dir_info": {"editable": True}, "url": f"file://{tmp_path}/my%20clone"})

    monkeypatch.setattr("importlib.metadata.distribution", lambda name: Dist())
    install._editable_root.cache_clear()
    try:
        assert install.install_hint("cuda") == f"pip install -e '{tmp_path}/my clone[cuda]'"
    finally:
        install._editable_root.cache_clear()


def test_a_release_is_told_the_pypi_extra(monkeypatch):
    class Dist:
        def read_text(self, name):
            return None      # a wheel from an index has no direct_url.json

    monkeypatch.setattr("importlib.metadata.distribution", lambda name: Dist())
    install._editable_root.cache_clear()
    try:
        assert install.install_hint("wgpu") == "pip install 'vyre[wgpu]'"
    finally:
        install._editable_root.cache_clear()

