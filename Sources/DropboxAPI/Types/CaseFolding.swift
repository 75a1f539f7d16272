/// How Dropbox tells names apart: case-insensitively, by a folded form of each path (the
/// `path_lower` of its metadata). A client that looks names up before Dropbox has seen them
/// (the mount, for files not yet uploaded) must fold them the same way, or a file it makes
/// sits under one key here and another on Dropbox.
///
/// Dropbox does not document its folding. This folds each character alone by its
/// one-character (Unicode "simple") lowercase mapping; Swift's `lowercased()` applies the
/// full mapping, which differs where a letter lowers to more than one character: U+0130
/// "İ" folds to a plain "i" here, to "i" + U+0307 there. doc/SEMANTICS.md ("which names
/// are the same") says what happens where Dropbox folds a letter some other way.
public enum CaseFolding {
    public static func fold(_ text: String) -> String {
        if text.utf8.allSatisfy({ $0 < 0x80 }) { return text.lowercased() }
        var folded = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            folded.append(scalar.properties.lowercaseMapping.unicodeScalars.first ?? scalar)
        }
        return String(folded)
    }
}
