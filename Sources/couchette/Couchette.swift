import ArgumentParser

@main
struct Couchette: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "couchette",
        abstract: "A local server that speaks Apache CouchDB's HTTP API and replication protocol.",
        version: "0.1.0",
        subcommands: [Serve.self, Replicate.self, Compact.self, Dump.self, Load.self, Version.self],
        defaultSubcommand: Serve.self)
}
