"""vyre.driver.bounded: the driver layer's bounded caches (cachetools) keep their size, evict
in their order, hand evicted and cleared values to ``on_evict`` once each, and a lock-free
reader of a fifo never raises while a writer fills and clears it."""

from __future__ import annotations

import threading

from vyre.driver.bounded import fifo, lru


def test_fifo_evicts_the_oldest_and_reports_each_value_once():
    dropped: list[int] = []
    c = fifo(3, on_evict=dropped.append)
    for k in range(5):
        c[k] = k * 10
    assert list(c) == [2, 3, 4] and dropped == [0, 10]
    assert c.get(0) is None and c.get(3) == 30
    c.clear()
    assert len(c) == 0 and dropped == [0, 10, 20, 30, 40]


def test_lru_keeps_what_was_read():
    c = lru(2)
    c["a"], c["b"] = 1, 2
    assert c.get("a") == 1
    c["c"] = 3
    assert set(c) == {"a", "c"}


def test_a_lock_free_reader_never_raises_while_a_writer_churns():
    c = fifo(8)
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        n = 0
        while not stop.is_set():
            with lock:
                c[n % 32] = n
                if n % 97 == 0:
                    c.clear()
            n += 1

    def read() -> None:
        try:
            for i in range(200_000):
                c.get(i % 32)
        except BaseException as exc:   # pragma: no cover - the failure this test looks for
            errors.append(exc)

    w = threading.Thread(target=write)
    w.start()
    readers = [threading.Thread(target=read) for _ in range(3)]
    for r in readers:
        r.start()
    for r in readers:
        r.join()
    stop.set()
    w.join()
    assert not errors
