"""node/protobuild.py builds the FileDescriptorProto of each API table with protobuf's descriptor_pb2:
every field, map, proto3 optional, enum and method as protoc would write it, and a pool takes it.
(The tables against kubelet's own protos: tests/test_upstream.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from xpu_cdi.deviceplugin import api as dp
from xpu_cdi.dra import api as dra
from xpu_cdi.node import podresources
from xpu_cdi.host import wiring
from xpu_cdi.node import protobuild
from xpu_cdi.node.protobuild import BOOL, INT64, MANY, MAP, ONE, OPTIONAL, STRING

F = descriptor_pb2.FieldDescriptorProto
TABLES = {
    "deviceplugin": (dp.PACKAGE, dp.MESSAGES, dp.SERVICES, {}),
    "podresources": (podresources.PACKAGE, podresources.MESSAGES, podresources.SERVICES, {}),
    "dra registration": (dra.REGISTRATION_PACKAGE, dra.REGISTRATION_MESSAGES, dra.REGISTRATION_METHODS, {}),
    "dra": (dra.DRA_PACKAGE, dra.DRA_MESSAGES, dra.DRA_METHODS, {}),
    "dra health": (dra.HEALTH_PACKAGE, dra.HEALTH_MESSAGES, dra.HEALTH_METHODS, dra.HEALTH_ENUMS),
    "containerd version": (wiring.VERSION_PACKAGE, wiring.VERSION_MESSAGES, wiring.VERSION_SERVICES, {}),
}


@pytest.mark.parametrize("table", TABLES.values(), ids=list(TABLES))
def test_each_table_builds_its_classes(table: Any) -> None:
    """Every message and service of the table, in a pool of its own: each message class is there."""
    fdp = protobuild.file_descriptor(*table)
    assert (fdp.package, fdp.syntax) == (table[0], "proto3")
    assert [m.name for m in fdp.message_type] == list(table[1])
    assert [s.name for s in fdp.service] == list(table[2])
    classes = protobuild.build(*table)
    assert {name: cls.DESCRIPTOR.full_name for name, cls in classes.items()} == \
        {name: f"{table[0]}.{name}" for name in table[1]}


def test_every_kind_of_field() -> None:
    messages = {"Item": [("id", 1, STRING, ONE)],
                "Box": [("items", 1, "Item", MANY), ("by_name", 2, "Item", MAP), ("tags", 3, STRING, MAP),
                        ("size", 300, INT64, OPTIONAL), ("open", 4, BOOL, OPTIONAL), ("state", 5, "State", ONE)]}
    services = {"Store": [("Get", "Item", "Box", False), ("Watch", "Item", "Box", True)]}
    fdp = protobuild.file_descriptor("p.q", messages, services, {"State": [("OFF", 0), ("ON", 1)]})
    box = fdp.message_type[1]
    got = [(f.name, f.number, f.label, f.type, f.type_name, f.json_name, f.HasField("oneof_index") and f.oneof_index,
            f.proto3_optional) for f in box.field]
    assert got == [("items", 1, F.LABEL_REPEATED, F.TYPE_MESSAGE, ".p.q.Item", "items", False, False),
                   ("by_name", 2, F.LABEL_REPEATED, F.TYPE_MESSAGE, ".p.q.Box.ByNameEntry", "by_name", False, False),
                   ("tags", 3, F.LABEL_REPEATED, F.TYPE_MESSAGE, ".p.q.Box.TagsEntry", "tags", False, False),
                   ("size", 300, F.LABEL_OPTIONAL, F.TYPE_INT64, "", "size", 0, True),
                   ("open", 4, F.LABEL_OPTIONAL, F.TYPE_BOOL, "", "open", 1, True),
                   ("state", 5, F.LABEL_OPTIONAL, F.TYPE_ENUM, ".p.q.State", "state", False, False)]
    assert [o.name for o in box.oneof_decl] == ["_size", "_open"]
    entries = {n.name: n for n in box.nested_type}
    assert all(n.options.map_entry for n in entries.values())
    assert [(f.name, f.number, f.type, f.type_name) for f in entries["ByNameEntry"].field] == \
        [("key", 1, F.TYPE_STRING, ""), ("value", 2, F.TYPE_MESSAGE, ".p.q.Item")]
    assert entries["TagsEntry"].field[1].type == F.TYPE_STRING
    assert [(v.name, v.number) for v in fdp.enum_type[0].value] == [("OFF", 0), ("ON", 1)]
    assert [(m.name, m.input_type, m.output_type, m.server_streaming) for m in fdp.service[0].method] == \
        [("Get", ".p.q.Item", ".p.q.Box", False), ("Watch", ".p.q.Item", ".p.q.Box", True)]
    # and the pool takes it: a message with all of them round-trips
    classes = protobuild.build("p.q", messages, services, {"State": [("OFF", 0), ("ON", 1)]})
    box_msg = classes["Box"](items=[classes["Item"](id="a")], tags={"k": "v"}, size=0, state=1)
    back = classes["Box"].FromString(box_msg.SerializeToString())
    assert back.HasField("size") and not back.HasField("open") and dict(back.tags) == {"k": "v"}
    assert back.by_name["x"].id == "" and back.state == 1
