import CouchCore
import CouchReplication
import Testing

/// Reading `_replicate` bodies, redacting credentials, and replication IDs.
@Suite struct ReplicationSettingsTests {
    func settings(_ body: JSONValue) throws -> ReplicationSettings {
        try ReplicationSettings(json: body.objectValue!)
    }

    @Test func readsEveryOption() throws {
        let settings = try settings([
            "source": "http://u:p%40ss@example.com:5984/a%2Fb", "target": "local",
            "continuous": true, "create_target": true, "create_target_params": ["q": 1],
            "selector": ["type": "x"], "since_seq": "12-abc", "use_checkpoints": false,
            "checkpoint_interval": 5000, "worker_batch_size": 100, "worker_processes": 2,
            "winning_revs_only": true, "retries_per_request": 0,
        ])
        guard case .remote(let source) = settings.source else { Issue.record("remote source"); return }
        #expect(source.host == "example.com")
        #expect(source.port == 5984)
        #expect(source.path == "/a%2Fb/")
        #expect(source.credentials == RemotePeer.Credentials(user: "u", password: "p@ss"))
        #expect(source.databaseURL == "http://example.com:5984/a%2Fb/")
        #expect(settings.target == .local(try DatabaseName("local")))
        #expect(settings.continuous && settings.createTarget && settings.winningRevisionsOnly)
        #expect(!settings.useCheckpoints)
        #expect(settings.createTargetParameters["q"] == 1)
        #expect(settings.filter == .selector(["type": "x"]))
        #expect(settings.sinceSequence == SourceSequence("12-abc"))
        #expect(settings.checkpointIntervalMilliseconds == 5000)
        #expect(settings.workerBatchSize == 100)
        #expect(settings.workerCount == 2)
        #expect(settings.retriesPerRequest == 0)
    }

    @Test func endpointObjectsCarryHeadersAuthAndTLS() throws {
        let settings = try settings([
            "source": ["url": "https://h/db", "headers": ["X-Token": "t", "Authorization": "Basic dTpw"],
                       "ca_file": "/etc/ca.pem", "pinned_public_key": "sha256//abc="],
            "target": ["url": "http://h2/db", "auth": ["basic": ["username": "x", "password": "y"]]],
        ])
        guard case .remote(let source) = settings.source, case .remote(let target) = settings.target else {
            Issue.record("remote peers")
            return
        }
        #expect(source.headers == [RemotePeer.Header(name: "X-Token", value: "t")])
        #expect(source.credentials == RemotePeer.Credentials(user: "u", password: "p"))
        #expect(source.tls.caFile == "/etc/ca.pem")
        #expect(source.tls.pinnedPublicKey == "sha256//abc=")
        #expect(target.credentials == RemotePeer.Credentials(user: "x", password: "y"))
        #expect(target.displayURL == "http://h2/db/", "credentials not from the URL are not shown")
    }

    @Test func passwordsAreRedactedAsCouchDBDoes() throws {
        let peer = try ReplicationPeer(json: "http://admin:s3cret@127.0.0.1:5984/db", role: "source")
        #expect(peer.displayName == "http://admin:*****@127.0.0.1:5984/db/")
        #expect(!peer.displayName.contains("s3cret"))
    }

    @Test func refusesWhatCouchDBRefuses() {
        for body: JSONValue in [
            ["target": "b"],
            ["source": "a"],
            ["source": "a", "target": "b", "doc_ids": ["x"], "filter": "d/f"],
            ["source": "a", "target": "b", "doc_ids": "x"],
            ["source": "a", "target": "b", "continuous": "yes"],
            ["source": "a", "target": "b", "worker_batch_size": 0],
            ["source": "a", "target": "b", "query_params": 1, "filter": "d/f"],
            ["source": "a", "target": "b", "filter": "nofilter"],
            ["source": "Not A Name", "target": "b"],
            ["source": "a", "target": "b", "selector": ["$bad": 1]],
        ] {
            #expect(throws: ReplicationError.self, "\(body.serializedString())") { try settings(body) }
        }
    }

    @Test func cancelRequests() throws {
        guard case .cancelByID(let id) = try ReplicationSettings.request(from: ["replication_id": "abc+continuous", "cancel": true]) else {
            Issue.record("cancel by ID")
            return
        }
        #expect(id == "abc+continuous")
        guard case .cancel = try ReplicationSettings.request(from: ["source": "a", "target": "b", "cancel": true]) else {
            Issue.record("cancel by body")
            return
        }
    }

    // MARK: Replication IDs

    func id(_ body: JSONValue, uuid: String = "uuid1", code: String? = nil) throws -> ReplicationID {
        ReplicationID(settings: try settings(body), serverUUID: uuid, filterCode: code)
    }

    @Test func theSameReplicationHasTheSameID() throws {
        let body: JSONValue = ["source": "http://u:p@h:5984/a", "target": "b"]
        #expect(try id(body) == id(body))
        #expect(try id(body).baseID.count == 32)
        #expect(try id(body).checkpointDocumentID.rawValue == "_local/" + id(body).baseID)
    }

    @Test func whatIsCopiedChangesTheID() throws {
        let base = try id(["source": "a", "target": "b"])
        #expect(try id(["source": "a", "target": "c"]) != base)
        #expect(try id(["source": "a", "target": "b"], uuid: "uuid2") != base)
        #expect(try id(["source": "a", "target": "b", "doc_ids": ["x"]]) != base)
        #expect(try id(["source": "a", "target": "b", "selector": ["x": 1]]) != base)
        #expect(try id(["source": "a", "target": "b", "since_seq": 5]) != base)
        #expect(try id(["source": "a", "target": "b", "winning_revs_only": true]) != base)
        let filtered = try id(["source": "a", "target": "b", "filter": "d/f", "query_params": ["k": "1"]], code: "function(){}")
        #expect(try id(["source": "a", "target": "b", "filter": "d/f", "query_params": ["k": "2"]], code: "function(){}") != filtered)
        #expect(try id(["source": "a", "target": "b", "filter": "d/f", "query_params": ["k": "1"]], code: "function(){ }") != filtered)
    }

    @Test func passwordsDefaultPortsAndModesDoNotChangeTheBaseID() throws {
        let base = try id(["source": "http://u:p@h/a", "target": "b"])
        #expect(try id(["source": "http://u:other@h/a", "target": "b"]).baseID == base.baseID)
        #expect(try id(["source": "http://u:p@h:5984/a", "target": "b"]).baseID == base.baseID)
        #expect(try id(["source": "http://u:p@h:5985/a", "target": "b"]).baseID != base.baseID)
        #expect(try id(["source": "http://v:p@h/a", "target": "b"]).baseID != base.baseID, "the user is part of it")
        #expect(try id(["source": ["url": "http://u:p@h/a", "headers": ["X": "1"]], "target": "b"]).baseID != base.baseID)
        let continuous = try id(["source": "http://u:p@h/a", "target": "b", "continuous": true, "create_target": true])
        #expect(continuous.baseID == base.baseID)
        #expect(continuous.jobID == base.baseID + "+continuous+create_target")
        #expect(ReplicationID.baseID(ofJobID: continuous.jobID) == base.baseID)
        #expect(ReplicationID.baseID(ofJobID: base.baseID + " continuous") == base.baseID)
    }
}
