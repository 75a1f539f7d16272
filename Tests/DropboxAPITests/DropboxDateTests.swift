import DropboxAPI
import Foundation
import Testing

/// Dropbox's timestamps, parsed and made by hand (no formatter per entry): the same as
/// Foundation's ISO 8601 formatter says, and nothing for text of another shape.
@Suite("client: Dropbox timestamps")
struct DropboxDateTests {
    @Test func timestampsRoundTripAndAgreeWithFoundation() {
        let reference = ISO8601DateFormatter()
        for seconds in [0, 1, 951_782_400, 1_431_445_838, 2_147_483_647, 4_102_444_799] as [TimeInterval] {
            let date = Date(timeIntervalSince1970: seconds)
            let text = DropboxDate.format(date)
            #expect(text == reference.string(from: date))
            #expect(DropboxDate.parse(text) == date)
        }
        #expect(DropboxDate.format(Date(timeIntervalSince1970: 1.9)) == "1970-01-01T00:00:01Z")
        #expect(DropboxDate.parse("2015-05-12T15:50:38Z") == reference.date(from: "2015-05-12T15:50:38Z"))
    }

    @Test func otherShapesAreNotDates() {
        for text in ["", "2015-05-12", "2015-05-12T15:50:38", "2015-05-12T15:50:38+01:00", "2015-13-12T15:50:38Z",
                     "2015-05-12T24:00:00Z", "2015-05-1xT15:50:38Z", "２０15-05-12T15:50:38Z"] {
            #expect(DropboxDate.parse(text) == nil, "\(text)")
        }
    }
}
