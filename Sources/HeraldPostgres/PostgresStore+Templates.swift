// SPDX-License-Identifier: Apache-2.0
package import HeraldCore

extension PostgresStore {
    package func saveTemplate(_ template: Template) async throws -> Template {
        try await self.write { db in
            let rows = try await db.query(
                """
                INSERT INTO templates (\(Template.columns)) VALUES ($1, $2, $3, $4, $5, $5)
                ON CONFLICT (app_id, id) DO UPDATE SET name = excluded.name, variants = excluded.variants, updated_at = excluded.updated_at
                RETURNING \(Template.columns)
                """,
                [.text(template.appID), .text(template.id), .text(template.name), .text(template.storedVariants), .int(template.updatedAt)]
            )
            return rows.first.map { Template(row: $0) } ?? template
        }
    }

    package func templates(appID: String) async throws -> [Template] {
        try await self.read { db in
            try await db.query(
                "SELECT \(Template.columns) FROM templates WHERE app_id = $1 ORDER BY name COLLATE \"C\", id COLLATE \"C\"", [.text(appID)]
            ).map { Template(row: $0) }
        }
    }

    package func template(appID: String, id: String) async throws -> Template? {
        try await self.read { db in
            try await db.query("SELECT \(Template.columns) FROM templates WHERE app_id = $1 AND id = $2", [.text(appID), .text(id)]).first.map {
                Template(row: $0)
            }
        }
    }

    package func deleteTemplate(appID: String, id: String) async throws -> Bool {
        try await self.write { db in
            try await db.query("DELETE FROM templates WHERE app_id = $1 AND id = $2 RETURNING id", [.text(appID), .text(id)]).isEmpty == false
        }
    }
}
