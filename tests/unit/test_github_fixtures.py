"""The GitHub deliveries the tests read are GitHub's own examples, byte for byte: each
file in tests/data/github-payloads is listed in its MANIFEST.json with the SHA-256 of
the upstream file, and its licence is beside it, so a clone stands alone and no test
passes on a delivery someone edited to fit."""

import hashlib
import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "github-payloads"
LICENCES = {"LICENSE.octokit-webhooks.txt", "LICENSE.octokit-webhooks-methods.txt"}
NOT_LISTED = LICENCES | {"MANIFEST.json", "signature-vectors.json"}


def test_every_vendored_delivery_is_the_upstream_file() -> None:
    """Each delivery's bytes hash to the manifest's SHA-256 and length, and every file
    in the folder (but the licences, the manifest and the signature vectors) is listed."""
    manifest = json.loads((FIXTURES / "MANIFEST.json").read_text())
    listed = {entry["file"]: entry for entry in manifest["files"]}
    present = {path.name for path in FIXTURES.iterdir()} - NOT_LISTED
    assert present == set(listed)
    for name, entry in listed.items():
        data = (FIXTURES / name).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["bytes"], entry["sha256"])
        assert entry["source_repo"] == "octokit/webhooks"


def test_the_licences_travel_with_the_deliveries() -> None:
    """Both MIT licences are in the folder, and the signature vectors name theirs."""
    for name in LICENCES:
        assert "MIT License" in (FIXTURES / name).read_text()
    vectors = json.loads((FIXTURES / "signature-vectors.json").read_text())
    assert "LICENSE.octokit-webhooks-methods.txt" in vectors["upstream_licenses"]
