"""A Python process that hangs in places known in advance, for the hang
view's Python frames: the main thread reads, in `wait_for_reply`, a pipe
no one writes (it holds the write end itself), while a worker thread
waits, in `take_the_lock`, for a lock the main thread holds."""

import os
import threading

lock = threading.Lock()


def take_the_lock():
    with lock:
        pass


def wait_for_reply(fd):
    return os.read(fd, 1)


def serve():
    lock.acquire()
    worker = threading.Thread(target=take_the_lock, name="worker")
    worker.start()
    reply, _ = os.pipe()
    wait_for_reply(reply)


serve()
