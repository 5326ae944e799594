"""`orch report` links the profiles `orch profile` wrote into the results folder, and only then."""


from orchestrator.report.profile_report import md_table, profile_links


def test_no_profile_no_section(tmp_path):
    assert profile_links(tmp_path, tmp_path / "report") == ""


def test_links_each_profile_relative_to_the_report(tmp_path):
    for sub in ("profile", "profile/focal"):
        (tmp_path / sub).mkdir(parents=True, exist_ok=True)
        (tmp_path / sub / "profile.md").write_text("# Profile\n")
    text = profile_links(tmp_path, tmp_path / "report")
    assert "## Profiles" in text
    assert "- [profile](../profile/profile.md)" in text
    assert "- [profile/focal](../profile/focal/profile.md)" in text


def test_markdown_table_cells():
    text = md_table([{"a": 1234.5, "b": 0.01234, "c": None, "d": "x|y"}])
    assert text.splitlines()[2] == "| 1,234 | 0.0123 | – | x\\|y |"
