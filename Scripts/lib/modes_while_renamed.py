"""A folder renamed away and back while other processes list it: its files keep their modes.

Usage: modes_while_renamed.py FOLDER ROUNDS

Makes FOLDER/p with four files of mode 600, then renames p to p-away and back ROUNDS times,
and after each pair stats the four files, while two other processes list p and p-away
without pause (readdirplus hands the kernel each entry's attributes). Every mode must stay
600. Exit status 1 at the third file seen with another mode, with the rounds it was seen at.

Found, on a mount that looked a listed entry's mode up at the path the entry had when it
was listed: a rename of its folder in between showed the default mode (644), and the kernel
kept it for the next stat (within a few hundred rounds).
"""
import os
import stat
import sys

NAMES = ["f%d" % k for k in range(4)]


def list_until_stopped(top):
    while not os.path.exists(top + "/stop"):
        for folder in ("p", "p-away"):
            try:
                for _ in os.scandir(top + "/" + folder):
                    pass
            except FileNotFoundError:
                pass


def main():
    top, rounds = sys.argv[1], int(sys.argv[2])
    os.makedirs(top + "/p")
    for name in NAMES:
        with open(top + "/p/" + name, "w") as f:
            f.write("x")
        os.chmod(top + "/p/" + name, 0o600)
    listers = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            list_until_stopped(top)
            os._exit(0)
        listers.append(pid)
    wrong = []
    try:
        for index in range(rounds):
            os.rename(top + "/p", top + "/p-away")
            os.rename(top + "/p-away", top + "/p")
            for name in NAMES:
                mode = stat.S_IMODE(os.stat(top + "/p/" + name).st_mode)
                if mode != 0o600:
                    wrong.append("round %d: %s: mode %o, want 600" % (index, name, mode))
            if len(wrong) >= 3:
                break
    finally:
        open(top + "/stop", "w").close()
        for pid in listers:
            os.waitpid(pid, 0)
    print("%d rounds, %d wrong modes" % (index + 1, len(wrong)))
    for line in wrong:
        print(line)
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
