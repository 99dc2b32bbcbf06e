"""The launch argument buffer's layout as runtime/launch.py reads it back: a kept GPU buffer patches a replaced
View's pointer at the slot ``_pointer_slots`` names (``KeptDeviceBuffer``), so that slot must be where the packer put
that View's pointer, for range and team policies, scalars of both kinds, and C-contiguous and strided Views. No
compiler: the buffer is packed and read back in Python."""
from __future__ import annotations

import struct

import pytest

import kfuse as pk
from kfuse.calls import prepare
from kfuse.codegen import kernel as codegen
from kfuse.runtime import launch

pytestmark = pytest.mark.backend("null")


@pk.workunit
def mixed(i: int, n: int, a: float, x: pk.View1D[pk.double], m: pk.View2D[pk.double], y: pk.View1D[pk.double]):
    y[i] = a * x[i] + m[i][n]


@pk.workunit
def team_mixed(team: pk.TeamMember, m: pk.View2D[pk.double], a: float, y: pk.View1D[pk.double]):
    i: int = team.league_rank()
    y[i] = a * m[i][0]


def _read_back(workunit, policy, **kwargs) -> tuple:
    """(the packed buffer's slots, the pointer slots, the Views' pointers in parameter order)."""
    prepared = prepare(workunit, "for", policy, (), kwargs).prepared
    generated = codegen.generate(prepared.source, prepared.spec, prepared.name)
    spec = prepared.spec
    pack = launch._packer(struct.Struct("=" + generated.slot_format).pack, spec, None, prepared.name, False)
    args = tuple(kwargs[name] for name, _ in spec.params)
    slots = struct.unpack("=" + generated.slot_format, pack(launch.policy_slots(policy), args))
    pointers = [kwargs[name].ptr for name, t in spec.params if t.is_view]
    return slots, launch._pointer_slots(spec, len(generated.slot_format)), pointers


def test_pointer_slots_are_where_a_range_launch_packs_each_views_pointer():
    big = pk.View([8, 16])
    strided = big[:, 3:11]
    slots, at, pointers = _read_back(mixed, pk.RangePolicy(0, 8), n=2, a=1.5, x=pk.View([8]), m=strided,
                                     y=pk.View([8]))
    assert at == (4, 6, 11)  # bounds 2, n, a; x: pointer, extent; m: pointer, 2 extents, 2 strides; y
    assert [slots[k] for k in at] == pointers
    assert slots[7:9] == strided.shape and slots[9:11] == strided.strides


def test_pointer_slots_are_where_a_team_launch_packs_each_views_pointer():
    slots, at, pointers = _read_back(team_mixed, pk.TeamPolicy(8, 1), m=pk.View([8, 4]), a=2.0, y=pk.View([8]))
    assert at == (7, 11)  # league, team size, vector length and 4 scratch sizes; m: pointer, 2 extents; a; y
    assert [slots[k] for k in at] == pointers
