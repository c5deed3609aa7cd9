"""The README's Python snippet runs as a script, as a reader would save and run it."""

import re
import subprocess
import sys

from conftest import ROOT


def test_the_readme_snippet_runs_as_a_script(tmp_path) -> None:
    readme = (ROOT / "README.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", readme, re.S)
    assert snippet is not None
    script = tmp_path / "snippet.py"
    script.write_text(snippet.group(1))
    out = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "0x" in out.stdout, "addresses print in hex"
    assert "verdict:" in out.stdout and "published" in out.stdout
