import Foundation

/// A name or path as Dropbox and Linux tell them apart: by its bytes. Swift's `String`
/// equality, and so a `[String: …]` key, is Unicode canonical equivalence: `café` written
/// with one code point (NFC) and with `e` + U+0301 (NFD) are one string to it, but two names
/// on Dropbox and on a Linux disk, each with a file of its own. A cache keyed by `String`
/// gave the second file's reader the first one's bytes.
struct ExactKey: Hashable {
    let text: String

    init(_ text: String) { self.text = text }

    static func == (a: ExactKey, b: ExactKey) -> Bool { same(a.text, b.text) }

    func hash(into hasher: inout Hasher) {
        var text = text
        text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// Whether two strings are the same bytes.
    static func same(_ a: String, _ b: String) -> Bool { a.utf8.elementsEqual(b.utf8) }

    /// The other strings canonically equivalent to `name` that Swift takes for it: its
    /// composed (NFC) and decomposed (NFD) forms where they differ from it. None for ASCII.
    static func equivalents(of name: String) -> [String] {
        guard name.utf8.contains(where: { $0 >= 0x80 }) else { return [] }
        var forms: [String] = []
        for form in [name.precomposedStringWithCanonicalMapping, name.decomposedStringWithCanonicalMapping]
        where !same(form, name) && !forms.contains(where: { same($0, form) }) {
            forms.append(form)
        }
        return forms
    }
}
