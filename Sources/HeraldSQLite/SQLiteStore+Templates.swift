// SPDX-License-Identifier: Apache-2.0
package import HeraldCore

extension SQLiteStore {
    package func saveTemplate(_ template: Template) async throws -> Template {
        try await self.database.write { db in
            var saved = template
            try db.each(
                """
                INSERT INTO templates (\(Template.columns)) VALUES (?1, ?2, ?3, ?4, ?5, ?5)
                ON CONFLICT (app_id, id) DO UPDATE SET name = excluded.name, variants = excluded.variants, updated_at = excluded.updated_at
                RETURNING \(Template.columns)
                """,
                [.text(template.appID), .text(template.id), .text(template.name), .text(template.storedVariants), .integer(template.updatedAt)]
            ) { saved = Template(row: $0) }
            return saved
        }
    }

    package func templates(appID: String) async throws -> [Template] {
        try await self.database.read { db in
            var templates: [Template] = []
            try db.each("SELECT \(Template.columns) FROM templates WHERE app_id = ? ORDER BY name, id", [.text(appID)]) {
                templates.append(Template(row: $0))
            }
            return templates
        }
    }

    package func template(appID: String, id: String) async throws -> Template? {
        try await self.database.read { db in
            var template: Template?
            try db.each("SELECT \(Template.columns) FROM templates WHERE app_id = ? AND id = ?", [.text(appID), .text(id)]) {
                template = Template(row: $0)
            }
            return template
        }
    }

    package func deleteTemplate(appID: String, id: String) async throws -> Bool {
        try await self.database.write { db in
            try db.query("DELETE FROM templates WHERE app_id = ? AND id = ?", [.text(appID), .text(id)])
            return db.changes > 0
        }
    }
}
