"""The `Examples:` section of every command's `--help`, kept in one table: the command
path (`schedule pause`) to the lines shown. `build_parser` appends them to each parser's
epilog; a unit test holds that every registered command has examples and that each one
parses (docs/cli.md)."""

from __future__ import annotations

import argparse
import textwrap

EXAMPLES: dict[str, tuple[str, ...]] = {
    "check": ("engine check", "engine check --rules loops --json"),
    "digest": ("engine digest", "engine digest --json"),
    "fmt": ("engine fmt loops/reaper.rules", "engine fmt --check loops", "engine fmt --write"),
    "diagram": ("engine diagram", "engine diagram reaper --format svg --out reaper.svg"),
    "serve": (
        "engine serve --db var/engine.db",
        "engine serve --db var/engine.db --port 7598 --no-worker",
    ),
    "worker": ("engine worker --id w1", "engine worker --once --id w2 --json"),
    "reap": ("engine reap", "engine reap --apply --proposal-ttl 7d --json"),
    "inject": ("engine inject event.json", "engine inject events.json --url http://127.0.0.1:7598"),
    "emit": (
        'engine emit factory.work.requested --payload \'{"repo": "factory"}\'',
        "engine emit repo.health.checked --loop health --every 1h --gate 'make check'",
    ),
    "render": ("engine render systemd --out deploy/", "engine render launchd --out ~/Library"),
    "github": ("engine github replay ping.json --event ping",),
    "github replay": (
        "engine github replay ping.json --event ping",
        "engine github replay pr.json --event pull_request --url http://127.0.0.1:7598",
    ),
    "notifications": (
        "engine notifications",
        "engine notifications --delivery failed --loop reaper",
        "engine notifications --limit 20 --json",
    ),
    "proposals": (
        "engine proposals",
        "engine proposals --state all --limit 10",
        "engine proposals show prop-6b01c344dbe5827b",
    ),
    "approve": (
        "engine approve prop-6b01c344dbe5827b --as alice --note 'looks right'",
        "engine approve prop-6b01c344dbe5827b prop-c4b8874158675113 --as alice",
    ),
    "reject": (
        "engine reject prop-c4b8874158675113 --as alice --reason 'not this week'",
        "engine reject prop-6b01c344dbe5827b prop-c4b8874158675113 --reason duplicates",
    ),
    "cancel": ("engine cancel run-43a598689aa612f1 --as alice --note 'being migrated'",),
    "work": ("engine work list", "engine work add repair:r1#42 'Repair the flaky test' --repo r1"),
    "work add": (
        "engine work add repair:r1#42 'Repair the flaky test' --repo r1 --as alice",
        "engine work add vendor-status 'Watch the status page' --link https://status.example.com",
    ),
    "work list": ("engine work list --state open", "engine work list --key repair:r1#42 --json"),
    "work show": ("engine work show work-0123456789abcdef",),
    "work bind": (
        "engine work bind work-0123456789abcdef nudge-repair --as alice",
        "engine work bind work-0123456789abcdef nudge-repair --request-id req-7 --json",
    ),
    "work block": ("engine work block work-0123456789abcdef --note 'waits on the vendor'",),
    "work reopen": ("engine work reopen work-0123456789abcdef --as alice",),
    "work complete": ("engine work complete work-0123456789abcdef --note merged",),
    "work cancel": ("engine work cancel work-0123456789abcdef --note 'not needed'",),
    "findings": ("engine findings", "engine findings list --status all --loop triage"),
    "findings list": ("engine findings list", "engine findings list --status all --json"),
    "findings show": ("engine findings show find-85f0ccf4d65cb4fa",),
    "findings promote": ("engine findings promote find-1178ca38f53176e3 --as alice --note real",),
    "findings dismiss": ("engine findings dismiss find-85f0ccf4d65cb4fa --note 'a flaky test'",),
    "shadow": ("engine shadow report shadowed",),
    "shadow report": (
        "engine shadow report shadowed",
        "engine shadow report shadowed --since 2026-12-01T14:00:00Z --json",
    ),
    "runs": ("engine runs", "engine runs --state failed", "engine runs run-cb9364adabe7dcae"),
    "events": ("engine events", "engine events --type clock.tick.reaper", "engine events demo-1"),
    "journal": (
        "engine journal",
        "engine journal --entity run --after 9 --limit 2 --json",
        "engine journal --follow --entity run --interval 5",
    ),
    "explain": ("engine explain demo-1", "engine explain reaper@2026-11-30T03:00:00Z"),
    "simulate": (
        "engine simulate --from 2026-12-01T00:00:00Z --to 2026-12-08T00:00:00Z --summary",
        "engine simulate --from 2026-12-01T00:00:00Z --to 2026-12-02T00:00:00Z --loop reaper",
        "engine simulate --from 2026-12-01T00:00:00Z --to 2026-12-02T00:00:00Z --approve after=15m",
    ),
    "schedule": ("engine schedule", "engine schedule show reaper --json"),
    "schedule list": ("engine schedule list", "engine schedule list --json"),
    "schedule show": ("engine schedule show reaper",),
    "schedule slots": ("engine schedule slots reaper", "engine schedule slots reaper --since 7d"),
    "schedule enable": ("engine schedule enable work-wm-home",),
    "schedule disable": ("engine schedule disable work-wm-home --json",),
    "schedule pause": ("engine schedule pause reaper --as alice --note 'disk migration'",),
    "schedule resume": ("engine schedule resume reaper --note 'migration done'",),
    "schedule trigger": ("engine schedule trigger reaper --as alice",),
    "schedule backfill": (
        "engine schedule backfill reaper --from 2026-11-30T00:00:00Z --to 2026-11-30T06:00:00Z",
        "engine schedule backfill reaper --from 2d --to now --limit 100",
    ),
    "schedule graduate": (
        "engine schedule graduate nudge-repair@work-c35ae169644de8d6 --as alice",
        "engine schedule graduate nudge-repair@work-c35ae169644de8d6 --at-restart --note "
        "'after the release'",
    ),
    "doctor": ("engine doctor", "engine doctor --pileup 20 --json"),
    "stats": ("engine stats", "engine stats --json"),
    "demo": ("engine demo", "engine demo --port 7599 --keep"),
    "replay": ("engine replay --since 7d", "engine replay --since 7d --fail-on-diff --json"),
}


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> dict[str, argparse.ArgumentParser]:
    """Every command under `parser`, by its path (`schedule pause`), with its parser."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found[" ".join((*path, name))] = child
                found.update(commands(child, (*path, name)))
    return found


def section(lines: tuple[str, ...]) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def apply(parser: argparse.ArgumentParser) -> None:
    """Append each command's examples to its epilog. A parser whose help argparse
    re-wraps gets its description wrapped once here instead, so the examples keep
    their lines."""
    for path, child in commands(parser).items():
        lines = EXAMPLES.get(path)
        if not lines:
            continue
        if child.formatter_class is argparse.HelpFormatter:
            child.formatter_class = argparse.RawDescriptionHelpFormatter
            child.description = textwrap.fill(child.description or "", 88) or None
            child.epilog = textwrap.fill(child.epilog, 88) if child.epilog else None
        child.epilog = "\n\n".join(p for p in (section(lines), child.epilog) if p)
