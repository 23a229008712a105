"""HCCL's environment variables against the config: a value the config does not run is a warning
naming the --set that runs it; a value it runs, or none, is silent."""

from __future__ import annotations

import warnings

import pytest

import npusim
from npusim.frontend.hccl.environment import HcclEnvironmentWarning, check_environment


def hccl_of(overrides=()):
    with npusim.session("a2", overrides=list(overrides), data=False) as session:
        return session.system.spec.hccl


@pytest.mark.parametrize("name,value,override", [
    ("HCCL_ALGO", "level0:NA;level1:ring", "hccl.algo=level0:NA;level1:ring"),
    ("HCCL_BUFFSIZE", "512", "hccl.buffer=512MiB"),
    ("HCCL_OP_EXPANSION_MODE", "AIV", "hccl.expansion_mode=aiv"),
    ("HCCL_DETERMINISTIC", "true", "hccl.deterministic=true"),
])
def test_a_setting_the_config_does_not_run_is_named_with_its_override(name: str, value: str, override: str) -> None:
    hccl = hccl_of()
    with pytest.warns(HcclEnvironmentWarning, match=f"{name}={value} is set in the environment.*--set '{override}'"):
        check_environment(hccl, {name: value})
    with warnings.catch_warnings():  # the config that runs it: silent
        warnings.simplefilter("error")
        check_environment(hccl_of([override]), {name: value})


def test_no_variable_or_the_configs_own_values_are_silent() -> None:
    hccl = hccl_of()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_environment(hccl, {})
        check_environment(hccl, {"HCCL_BUFFSIZE": "200", "HCCL_OP_EXPANSION_MODE": hccl.expansion_mode.upper(), "HCCL_ALGO": "",
                                 "HCCL_DETERMINISTIC": "false"})


def test_a_communicator_checks_the_process_environment(monkeypatch) -> None:
    monkeypatch.setenv("HCCL_ALGO", "level0:NA;level1:H-D_R")
    with pytest.warns(HcclEnvironmentWarning, match="HCCL_ALGO"), npusim.session("a2", data=False):
        npusim.hccl.communicator([0, 1])
