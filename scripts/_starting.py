"""How the scripts in scripts/ run their tool: amg_fast._entry.run_cli, as the amg-fast-* console
scripts do (Ctrl-C while the tool imports torch, or while Python shuts down after it: one line, no
traceback)."""
from amg_fast._entry import ctrl_c_while_importing, run_cli  # noqa: F401
