import ArgumentParser

@main
struct Couchette: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "couchette",
        abstract: "A local server that speaks Apache CouchDB's HTTP API and replication protocol.",
        discussion: """
            `couchette` alone serves ./data on 127.0.0.1:5984. The user guide is in docs/, one page \
            per topic, listed in README.md. See docs/configuration.md.
            """,
        version: "0.1.0",
        subcommands: [Serve.self, Replicate.self, Compact.self, Dump.self, Load.self, Version.self],
        defaultSubcommand: Serve.self)
}
