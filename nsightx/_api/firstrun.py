"""Checks on the first measured run, so that a mistake costs one run and not the whole sweep.

``combine_kernel_metrics`` and ``derive_metric`` are pure functions applied once the sweep has finished
(:mod:`nsightx._results.transform`), and ``normalize_against`` is applied when the DataFrame is built. A transform that
raises or returns a str would otherwise fail only after every run had been spent. :class:`CheckedSink` applies
the same functions to the first measured run as it reaches the sink, whichever backend produced it (the
in-process run loop writes each run as it finishes; the ncu backend writes its runs once its worker is done),
and refuses a first run that opened no annotated region: such a sweep would measure nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nsightx._errors import AnnotationError, ConfigError
from nsightx._results.baseline import check_baseline
from nsightx._results.records import RunRecords
from nsightx._results.sink import RunSink
from nsightx._results.transform import combine_records, derive
from nsightx._run.plan import Plan
from nsightx._spec.options import ProfileSpec


class FirstRunCheck:
    """The first-run checks of one call, bound to its plan and spec: ``CheckedSink(path, check=FirstRunCheck(..))``."""

    def __init__(self, plan: Plan, spec: ProfileSpec, *, sweep_first: bool = True) -> None:
        """Bind the checks to ``plan`` and ``spec``.

        Args:
            plan: The call's plan.
            spec: The call's options.
            sweep_first: Whether the run checked is the sweep's first run (config 0's). A task of a spread sweep
                for a later config checks its own first run, and only what a call in one process would refuse
                for any run: the transforms. What depends on which regions the run opened (none at all, the
                ``normalize_against`` baseline missing, every kernel ignored) is checked on config 0 alone, as
                in one process, where a later config that opens no region is measured and has no values.
        """
        self.plan = plan
        self.spec = spec
        self.sweep_first = sweep_first

    def __call__(self, run: RunRecords) -> None:
        """Raise when ``run``, the first measured run, shows that the sweep cannot give a useful result.

        Args:
            run: The first measured run (config index >= 0).

        Raises:
            AnnotationError: the run opened no ``nsightx.annotate`` region.
            KernelCountError: a region launched several kernels and no ``combine_kernel_metrics`` was given.
            TransformError: ``combine_kernel_metrics`` or ``derive_metric`` returned something that is not a value.
            MeasurementError: ``derive_metric`` raised.
            ConfigError: ``combine_kernel_metrics`` raised, ``ignore_kernel_list`` dropped every kernel, a derived
                metric is named like a measured one, or ``normalize_against`` names an annotation the run did not
                open.
        """
        if self.sweep_first:
            self._check_measured(run)
        spec, plan = self.spec, self.plan
        values = combine_records(
            [run], plan.metrics, ignore_kernels=spec.ignore_kernel_list, combine=spec.combine_kernel_metrics
        )
        if self.sweep_first and run.records and not values:
            kernels = sorted({r.kernel for r in run.records})
            raise ConfigError(
                f"ignore_kernel_list={list(spec.ignore_kernel_list)!r} drops every kernel {plan.function_name} "
                f"launched in its first run ({kernels}): nothing would be measured; list only helper kernels"
            )
        if spec.derive_metric is not None:
            derive(values, spec.derive_metric, plan.metrics, plan.configs, warn=False)
        if not self.sweep_first:
            return
        seen = {r.annotation for r in run.regions} | {r.annotation for r in run.records}
        check_baseline(plan.normalize_against, seen, plan.function_name, "its first run opened")

    def _check_measured(self, run: RunRecords) -> None:
        if run.regions or run.records:
            return
        plan = self.plan
        args = plan.configs[run.config] if 0 <= run.config < len(plan.configs) else ()
        raise AnnotationError(
            f"nothing was measured: {plan.function_name} opened no nsightx.annotate region in its first run "
            f"(config {run.config} {tuple(args)!r}); nsightx times only annotated regions, so wrap the work to "
            f'measure inside {plan.function_name} in `with nsightx.annotate("name"):`'
        )


class CheckedSink(RunSink):
    """A :class:`RunSink` that hands the first measured run to a check once it is stored.

    The run is stored first, so a run that fails the check is kept (in memory and in the raw file) like any
    other. The run loop's clean-up after an error writes the runs it still holds once more, the failed one
    included: :class:`RunSink` skips that second write of the same run, so each run is stored once.
    """

    def __init__(self, *args: Any, check: Callable[[RunRecords], None], **kwargs: Any) -> None:
        super().__init__(*args, on_first=check, **kwargs)
