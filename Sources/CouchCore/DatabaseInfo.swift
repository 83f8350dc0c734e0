/// What a database says of itself (`GET /db`, and `req.info` in design-document functions).
public struct DatabaseInfo: Sendable {
    public let name: DatabaseName
    public let documentCount: Int
    public let deletedDocumentCount: Int
    public let updateSequence: Int
    public let fileSize: Int
    public let activeSize: Int
    public let externalSize: Int
    public let instanceStartTime: String
    public let compactRunning: Bool

    public init(name: DatabaseName, documentCount: Int, deletedDocumentCount: Int, updateSequence: Int, fileSize: Int,
                activeSize: Int, externalSize: Int, instanceStartTime: String, compactRunning: Bool) {
        self.name = name
        self.documentCount = documentCount
        self.deletedDocumentCount = deletedDocumentCount
        self.updateSequence = updateSequence
        self.fileSize = fileSize
        self.activeSize = activeSize
        self.externalSize = externalSize
        self.instanceStartTime = instanceStartTime
        self.compactRunning = compactRunning
    }
}
