"""The ``crs`` root group: one-line errors, logging, and the registration of every command.

The commands live one group per module: stages.py (demo, run, extract, probe, score, report),
cache.py and verify.py, datasets.py, encoders.py, corruptions.py, bench.py, init.py; the last four
are imported when asked for (:data:`LAZY_COMMANDS`).
"""

from __future__ import annotations

import importlib
import logging
import sys
from concurrent.futures import BrokenExecutor

import click

from crs.cli.cache import cache, import_features
from crs.cli.datasets import datasets
from crs.cli.flags import SETTING_FLAGS
from crs.cli.stages import STAGE_COMMANDS
from crs.spec import SETTING_ATTRIBUTE, SpecError

LAZY_COMMANDS = {
    "bench": "crs.cli.bench:bench",
    "corruptions": "crs.cli.corruptions:corruptions",
    "encoders": "crs.cli.encoders:encoders_group",
    "init": "crs.cli.init:init",
    "reproduce": "crs.cli.reproduce:reproduce",
    "compare": "crs.cli.reproduce:compare",
    "plan": "crs.cli.plan:plan",
    "check": "crs.cli.check:check",
    "status": "crs.cli.plan:status",
    "weights": "crs.cli.weights:weights_group",
    "publish": "crs.cli.publish:publish",
    "verify": "crs.cli.publish:verify",
    "keygen": "crs.cli.publish:keygen",
    "leaderboard": "crs.cli.publish:leaderboard",
    "merge": "crs.cli.publish:merge",
}
"""Commands whose modules import torch, torchvision or the encoder libraries (seconds): imported when
the command is asked for, so ``crs score`` and ``crs report`` start without them."""

LAZY_HELP = {
    "bench": "Benchmarks (ratios against a baseline measured in the same run; absolute times are context only).",
    "corruptions": "Acquisition corruptions per modality (suite version enters the cache fingerprint).",
    "encoders": "Inspect the encoder registry (sources, preprocessing, licences, pretraining data).",
    "init": "Inspect ROOT (a folder of images, PNG/JPEG/DICOM, with a CSV) and write a spec for it; asks nothing.",
    "reproduce": "Re-run stage 2 and the score of RUN_FOLDER from its embedded spec and compare every table.",
    "compare": ("Two run folders side by side (leader, tier, which ranks moved); for runs of the same spec, then "
                "every records and score table under the reproducibility contract, exit 1 if broken."),
    "plan": "Per data set and encoder: images, clean and corrupted forward passes, cached, bytes, time.",
    "check": "Check data, labels, weights, folders, disk, image modes and the cache before any GPU time.",
    "status": "Stage 1's progress over every shard, from the cache's chunk flags: passes done, to go, time left.",
    "weights": "Fetch encoder weights from the Hugging Face Hub into the folder crs reads (crs itself never downloads).",
    "publish": "Write a scored RUN_FOLDER as a verifiable BUNDLE: records, predictions by image id, score, image digests, manifest.",
    "verify": "Check a BUNDLE: manifest, every file's role, signature, re-score; say verified or what is missing. Exit 1 if a check fails.",
    "keygen": "Write a new Ed25519 key pair NAME (private, owner-readable only) and NAME.pub (give this one away).",
    "leaderboard": "Write static, self-contained leaderboard pages for published BUNDLES: leaderboards, encoder cards, verification.",
    "merge": "Merge sites' aggregates-only BUNDLES (same replicate seed and n_boot) into a multi-site leaderboard.",
}
"""The first paragraph of each lazy command's help, so ``crs --help`` lists them without importing them
(torch: about 3 CPU s); a test checks they equal the commands' own."""

# Errors a user can fix: printed as one line and a non-zero exit, never a traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (
    ValueError, FileNotFoundError, PermissionError, RuntimeError, OSError, MemoryError,
)




def error_line(error: BaseException) -> str:
    """One line for a library error, with the flag of the setting that fixes it when it names one."""
    if isinstance(error, MemoryError):
        detail = f" ({str(error).splitlines()[0]})" if str(error) else ""
        return (f"out of memory{detail}; run fewer worker processes at once (option --jobs) "
                "or lower [extract] batch_size in the spec")
    if isinstance(error, BrokenExecutor):  # e.g. joblib's TerminatedWorkerError: the OOM killer's usual sign
        return ("a worker process died (the system most often kills one for running out of memory); "
                "run fewer worker processes at once (option --jobs)")
    message = str(error).splitlines()[0] if str(error) else type(error).__name__
    flag = SETTING_FLAGS.get(getattr(error, SETTING_ATTRIBUTE, ""))
    return f"{message} (option {flag})" if flag else message


class FriendlyGroup(click.Group):
    """A click group that turns user errors into ``crs: error: <message>`` and exit code 2, and
    imports the modules of :data:`LAZY_COMMANDS` only when one of them runs (or help lists them)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            module, attribute = LAZY_COMMANDS[cmd_name].split(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``: a lazy command not yet imported shows :data:`LAZY_HELP`."""
        commands = []
        for name in self.list_commands(ctx):
            if name in LAZY_COMMANDS and name not in self.commands:
                commands.append((name, click.Command(name, help=LAZY_HELP[name])))
            elif (command := self.get_command(ctx, name)) is not None and not command.hidden:
                commands.append((name, command))
        if commands:
            limit = formatter.width - 6 - max(len(name) for name, _ in commands)
            with formatter.section("Commands"):
                formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in commands])

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.exceptions.ClickException:
            raise
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except BrokenPipeError:  # output piped into `head` and closed: not an error
            sys.stderr.close()
            sys.exit(0)
        except USER_ERRORS as error:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            if isinstance(error, SpecError) and len(error.problems) > 1:  # every problem of the spec, one line each
                click.echo(f"crs: {len(error.problems)} problems in the spec:", err=True)
                for problem in error.problems:
                    click.echo(f"  - {problem}", err=True)
            click.echo(f"crs: error: {error_line(error)}", err=True)
            sys.exit(2)


@click.group(cls=FriendlyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="crs")
@click.option("--debug", is_flag=True, help="Show full tracebacks instead of one-line errors.")
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
@click.pass_context
def cli(ctx: click.Context, debug: bool, verbose: int) -> None:
    """crs: which frozen image encoder should a clinical model build on?

    Stage 1 (extract) caches every encoder's features once; stage 2 (probe, score, report) fits
    thousands of light probes on the cache and ranks encoders by the Clinical Reliability Score.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if verbose:
        logging.getLogger("crs").setLevel(level)


for command in (*STAGE_COMMANDS, datasets, cache, import_features):
    cli.add_command(command)


def main() -> None:
    """The ``crs`` console script and ``python -m crs``."""
    cli(obj={}, prog_name="crs")


if __name__ == "__main__":
    main()

