import CouchFunctionsEngine

// A worker process of a Couchette server: it runs one database's design functions, asked over
// the socket its server gave it (see FunctionWorkerService). Not meant to be started by hand.
FunctionWorkerService.run()
