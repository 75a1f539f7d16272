import Foundation
import Testing
import TestSupport

/// `user.*` extended attributes set here are kept on this machine, as modes are, and
/// `user.dropbox.*` are answered by name but never listed: tools that copy attributes
/// (`rsync -X`, `cp -a`, `tar --xattrs`) then work on the mount as on a disk. A second
/// `rsync -aX` into the mount exited 23 when every attribute was Dropbox's: rsync removed
/// the listed `user.dropbox.id` its source lacked, and the removal was refused.
@Suite("mount: extended attributes", .serialized, .timeLimit(.minutes(10)))
struct ExtendedAttributeTests {
    /// Setting, reading, listing and removing attributes on files and folders, the flags of
    /// setxattr(2), renames and removals, a descriptor on an unlinked file, and the tools that
    /// copy attributes: the same output as in a local folder.
    @Test func userAttributesBehaveAsInALocalFolder() async throws {
        try await MountFixture.with(seeds: []) { m in
            try await ToolWorkloadTests.same(m, "xattr", """
                attrs() { for f in "$@"; do echo "$f:"; getfattr -d -e hex "$f" 2>&1 | sed -n '/^#/!{/./p}' | sort; done; } && \\
                echo one > f && mkdir -p d/e && echo two > d/e/g && \\
                setfattr -n user.color -v red f && setfattr -n user.empty f && setfattr -n user.bin -v 0x00ff10 f && \\
                setfattr -n user.tag -v folder d && setfattr -n user.deep -v 1 d/e/g && \\
                attrs f d d/e/g && getfattr --only-values -n user.color f && echo && \\
                setfattr -n user.color -v blue f && setfattr -x user.bin f && attrs f && \\
                { setfattr -x user.missing f 2>&1; true; } && \\
                python3 -c '
                import errno, os
                def tried(what, call):
                    try:
                        call()
                        print(what, "ok")
                    except OSError as e:
                        print(what, errno.errorcode[e.errno])
                tried("create existing", lambda: os.setxattr("f", "user.color", b"x", os.XATTR_CREATE))
                tried("create new", lambda: os.setxattr("f", "user.new", b"n", os.XATTR_CREATE))
                tried("replace missing", lambda: os.setxattr("f", "user.other", b"x", os.XATTR_REPLACE))
                tried("replace existing", lambda: os.setxattr("f", "user.new", b"m", os.XATTR_REPLACE))
                tried("get missing", lambda: os.getxattr("f", "user.other"))
                tried("remove missing", lambda: os.removexattr("f", "user.other"))
                tried("no name", lambda: os.setxattr("f", "user.", b"x"))
                fd = os.open("gone", os.O_CREAT | os.O_RDWR, 0o644)
                os.setxattr(fd, "user.before", b"1")
                os.unlink("gone")
                os.setxattr(fd, "user.after", b"2")
                print("unlinked", sorted(os.listxattr(fd)), os.getxattr(fd, "user.before"))
                os.close(fd)
                print("names", sorted(os.listxattr("f")), os.getxattr("f", "user.new"))
                ' && \\
                mv f f2 && mv d d2 && attrs f2 d2/e/g && echo three > f && attrs f && \\
                rm f2 && echo four > f2 && attrs f2 && \\
                cp -a d2 d3 && attrs d3 d3/e/g && \\
                mkdir src && echo s > src/a && setfattr -n user.a -v 1 src/a && setfattr -n user.top -v t src && \\
                rsync -aX src/ dst/ && echo more >> src/a && setfattr -x user.a src/a && setfattr -n user.b -v 2 src/a && \\
                rsync -aX src/ dst/ && attrs dst dst/a && \\
                tar --xattrs -cf ../x.tar src && mkdir un && tar --xattrs -xf ../x.tar -C un && attrs un/src/a && rm ../x.tar
                """)
        }
    }

    /// Dropbox's own attributes, answered by name once it has the file, are not listed, so a
    /// second `rsync -aX` of a local folder into the mount changes what changed and exits 0
    /// (it failed with 23: it removed `user.dropbox.id`, listed on the folder and missing in
    /// its source, and the mount refused the removal). Setting or removing one is refused
    /// with EPERM: they describe Dropbox's copy.
    @Test func dropboxAttributesAreNotListedAndRsyncRunsTwice() async throws {
        try await MountFixture.with(seeds: []) { m in
            let source = m.root.appendingPathComponent("src").path
            let first = try await m.sh("""
                mkdir '\(source)' && echo a > '\(source)/a' && rsync -aX '\(source)/' "$M/dst/" && \
                python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "$M/dst" && \
                getfattr --only-values -n user.dropbox.rev "$M/dst/a" && echo && getfattr -d "$M/dst" "$M/dst/a"
                """)
            #expect(first.status == 0, "\(first)")
            #expect(!first.stdout.contains("user.dropbox.") && first.stdout.count > 10, "\(first)")
            let second = try await m.sh("echo b >> '\(source)/a' && rsync -aX '\(source)/' \"$M/dst/\" && cat \"$M/dst/a\"")
            #expect(second.status == 0, "\(second)")
            #expect(second.stdout == "a\nb\n")
            let refused = try await m.python("""
                import errno, os
                for call in (lambda: os.setxattr(os.environ["M"] + "/dst/a", "user.dropbox.rev", b"1"),
                             lambda: os.removexattr(os.environ["M"] + "/dst/a", "user.dropbox.id")):
                    try:
                        call()
                        print("ok")
                    except OSError as e:
                        print(errno.errorcode[e.errno])
                """)
            #expect(refused.stdout == "EPERM\nEPERM\n", "\(refused)")
        }
    }

    /// They are in the cache's store once setxattr returns (a kill -9 of the daemon right
    /// after loses none), are this machine's alone (another mount of the account sees none),
    /// and other namespaces than `user.` are refused as before. What a path keeps is bounded
    /// (64 KiB of names and values, as a value's own limit): beyond it ENOSPC, as a disk
    /// whose attribute space is full.
    @Test func keptThroughAKillAndOnThisMachineAlone() async throws {
        try await MountFixture.with(seeds: []) { m in
            let set = try await m.sh("""
                echo x > "$M/f" && mkdir "$M/d" && python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "$M" && \\
                setfattr -n user.kept -v yes "$M/f" && setfattr -n user.kept -v folder "$M/d"
                """)
            #expect(set.status == 0, "\(set)")
            try await m.killDaemon()
            try await m.mount()
            let after = try await m.sh("getfattr --only-values -n user.kept \"$M/f\" && echo && getfattr --only-values -n user.kept \"$M/d\"")
            #expect(after.stdout == "yes\nfolder", "\(after)")
            let other = try await m.mountAnother()
            let elsewhere = try await m.sh("getfattr -d '\(other)/f' '\(other)/d'; cat '\(other)/f'")
            #expect(elsewhere.stdout == "x\n", "\(elsewhere)")
            let refused = try await m.python("""
                import errno, os
                f = os.environ["M"] + "/f"
                for name, value in (("trusted.x", b"1"), ("security.x", b"1"), ("user.big", b"v" * 40000), ("user.big2", b"w" * 40000)):
                    try:
                        os.setxattr(f, name, value)
                        print(name, "ok")
                    except OSError as e:
                        print(name, errno.errorcode[e.errno])
                print(len(os.getxattr(f, "user.big")), sorted(os.listxattr(f)))
                """)
            #expect(refused.stdout == "trusted.x ENOTSUP\nsecurity.x ENOTSUP\nuser.big ok\nuser.big2 ENOSPC\n40000 ['user.big', 'user.kept']\n",
                    "\(refused)")
        }
    }
}
