"""The SQLite backup docs/operations.md gives works while the gateway runs: the writes still in the WAL included."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from gateway.stores import Batch, SqliteStore

from ._helpers import begin, delta

ROOT = Path(__file__).resolve().parents[2]


def documented_backup() -> list[str]:
    """The backup command of docs/operations.md, as an argv without its two paths."""
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    section = text.split("\n### SQLite\n", 1)[1].split("\n### ", 1)[0]
    [block] = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    argv = shlex.split(block.replace("\\\n", " "))
    return argv[: argv.index(".agora/agora.db")]  # then the live file and the backup's


async def test_the_documented_backup_of_an_open_store_holds_its_latest_writes(tmp_path: Path) -> None:
    live = SqliteStore(tmp_path / "agora.db")
    backup = tmp_path / "backup.db"
    run, _ = await begin(live, "t-backup")
    written = await live.write("t-backup", Batch(events=[delta(run, "kept")]))
    try:
        assert (tmp_path / "agora.db-wal").stat().st_size > 0  # the latest writes are in the WAL, not the file yet
        subprocess.run([*documented_backup(), str(tmp_path / "agora.db"), str(backup)], check=True, timeout=30)
    finally:
        await live.aclose()
    restored = SqliteStore(backup)
    try:
        events = await restored.read_events("t-backup")
        assert [e.seq for e in events][-len(written) :] == [e.seq for e in written]
        assert (await restored.get_run(run.run_id)) is not None
    finally:
        await restored.aclose()
