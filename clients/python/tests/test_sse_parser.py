from __future__ import annotations

from typing import List

from chronoq import SSEEvent, SSEParser


def feed_all(chunks: List[bytes]) -> List[SSEEvent]:
    p = SSEParser()
    out: List[SSEEvent] = []
    for c in chunks:
        out.extend(p.feed(c))
    return out


def test_line_ends_and_fields() -> None:
    stream = b"event: pub\r\nid: e:1\r\ndata: {\"a\":1}\r\n\r\n: ping\n\nevent: x\rdata:no-space\rdata:  two\r\r"
    evs = feed_all([stream])
    assert [(e.event, e.data, e.id) for e in evs] == [("pub", '{"a":1}', "e:1"), ("x", "no-space\n two", "e:1")]


def test_split_anywhere_gives_the_same_events() -> None:
    stream = "\ufeffevent: pub\r\nid: e:1\r\ndata: héllo\r\ndata: x\r\n\r\ndata: last\n\n".encode("utf-8")
    whole = feed_all([stream])
    assert [(e.event, e.data) for e in whole] == [("pub", "héllo\nx"), ("message", "last")]
    for i in range(len(stream) + 1):
        assert feed_all([stream[:i], stream[i:]]) == whole, i
    assert feed_all([stream[i : i + 1] for i in range(len(stream))]) == whole


def test_no_data_no_dispatch_and_id_rules() -> None:
    p = SSEParser()
    assert p.feed(b"event: lonely\nid: 7\n\n") == []
    assert p.last_event_id == "7"
    assert p.feed(b"id: bad\x00id\ndata: d\n\n")[0].id == "7"  # an id with NUL is ignored
    evs = p.feed(b"retry: 1500\nretry: x1\ndata\nfoo: bar\n\n")
    assert evs[0].data == "" and evs[0].retry == 1500 and evs[0].event == "message"


def test_trailing_cr_waits_for_lf() -> None:
    p = SSEParser()
    assert p.feed(b"data: a\r") == []
    assert p.feed(b"\n") == []  # the LF of the same CRLF, not a blank line
    assert [e.data for e in p.feed(b"\r\n")] == ["a"]


def test_positions_drop_repeats_and_build_the_last_event_id() -> None:
    import json

    from chronoq import Publication
    from chronoq._sse import Positions

    pos = Positions(["news", "app/chat"], "default", None)
    assert pos.last_event_id() is None

    def ev(kind: str, **d: object) -> SSEEvent:
        return SSEEvent(kind, json.dumps(d), "")

    pos.handle(ev("subscribed", channel="default/news", offset=0, epoch="e1"))
    pos.handle(ev("subscribed", channel="app/chat", offset=4, epoch="e2"))
    got = []
    for off in (1, 2, 2, 1, 3):
        item = pos.handle(ev("pub", channel="default/news", offset=off, epoch="e1", data=off))
        if isinstance(item, Publication):
            got.append(item.offset)
    assert got == [1, 2, 3]
    assert pos.last_event_id() == "e1:3,e2:4"
    # a new epoch is news even at a lower offset
    item = pos.handle(ev("pub", channel="default/news", offset=1, epoch="e9", data=0))
    assert isinstance(item, Publication) and pos.last_event_id() == "e9:1,e2:4"
