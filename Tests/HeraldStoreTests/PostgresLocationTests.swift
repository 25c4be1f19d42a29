// SPDX-License-Identifier: Apache-2.0
import HeraldCore
import HeraldPostgres
import Testing

@Suite struct PostgresLocationTests {
    @Test("a postgres:// URL gives host, port, user, password (percent-decoded once), database and sslmode")
    func parse() throws {
        let location = try PostgresLocation(url: "postgres://herald:p%40ss%25word@db.internal:6543/pushes?sslmode=require")
        #expect(location.host == "db.internal" && location.port == 6543)
        #expect(location.username == "herald" && location.password == "p@ss%word")
        #expect(location.database == "pushes" && location.sslMode == "require" && location.socketPath == nil)
        let socket = try PostgresLocation(url: "postgresql://herald@/pushes?host=/var/run/postgresql")
        #expect(socket.socketPath == "/var/run/postgresql/.s.PGSQL.5432")
        let defaults = try PostgresLocation(url: "postgres://ann@localhost")
        #expect(defaults.port == 5432 && defaults.database == "ann" && defaults.sslMode == "prefer")
    }

    @Test("anything else is refused with bad_database_url")
    func refused() {
        for url in ["mysql://x@y/z", "postgres://x@y/z?sslmode=sometimes", "not a url"] {
            #expect(throws: HeraldError.self) { try PostgresLocation(url: url) }
        }
        #expect((try? PostgresLocation(url: "postgres://x@y/z?sslmode=allow")) == nil)
    }
}
