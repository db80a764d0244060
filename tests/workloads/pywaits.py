"""Waits known in advance, for the Python frames of off-CPU stacks: the
main thread waits in `wait_for_it` for an event that a helper thread,
asleep for 300 ms in `release_it`, then sets."""

import threading
import time

done = threading.Event()


def release_it():
    time.sleep(0.3)
    done.set()


def wait_for_it():
    done.wait()


def main():
    helper = threading.Thread(target=release_it)
    helper.start()
    wait_for_it()
    helper.join()


main()
