from __future__ import annotations

import pytest
from nsightx_cupti._names import kernel_base_name


@pytest.mark.parametrize(
    ("mangled", "base"),
    [
        (
            "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_",
            "vectorized_elementwise_kernel",
        ),
        ("_Z10vector_addPiS_S_i", "vector_add"),
        ("_ZL6kernelPf", "kernel"),
        ("_ZN3foo3BarIiE3bazEv", "baz"),
        ("_ZN7cutlass7Kernel2I6FooBarEEvNT_6ParamsE", "Kernel2"),
        (
            "_ZN5flash24flash_fwd_splitkv_kernelI23Flash_fwd_kernel_traitsILi128ELi64ELi128ELi4ELb0ELb0EN7cutlass6"
            "half_tE19Flash_kernel_traitsILi128ELi64ELi128ELi4ES4_EELb1ELb0ELb0ELb0ELb1ELb1ELb0ELb0EEEv16Flash_fwd_"
            "params",
            "flash_fwd_splitkv_kernel",
        ),
    ],
)
def test_base_name_of_mangled_kernels(mangled: str, base: str) -> None:
    assert kernel_base_name(mangled) == base


@pytest.mark.parametrize(
    "name",
    [
        "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel",
        "splitKreduce_kernel",
        "_Z",  # truncated
        "_ZN3fooE",  # a nested name of one part gives that part
        "_ZN99tooshortE",  # length runs past the end
        "_ZZ4mainE1x",  # local entity: not understood, passed through
    ],
)
def test_names_it_does_not_understand_pass_through(name: str) -> None:
    got = kernel_base_name(name)
    assert got == name or (name == "_ZN3fooE" and got == "foo")
