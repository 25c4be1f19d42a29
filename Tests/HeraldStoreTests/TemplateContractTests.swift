// SPDX-License-Identifier: Apache-2.0
import HeraldCore
import HeraldTesting
import Testing

/// Templates per app, on every driver.
@Suite(.heavy) struct TemplateContractTests {
    func welcome(name: String = "Welcome", now: Int64) -> Template {
        Template(
            id: "tpl_welcome", appID: "demo", name: name,
            defaultVariant: TemplateVariant(title: "Hello {{name}}", body: "Welcome to \"{{app}}\""),
            variants: [
                "pt": TemplateVariant(title: "Olá {{name}}", subtitle: "Bem-vindo", body: "Bem-vindo ao {{app}}"),
                "pt-BR": TemplateVariant(title: "Oi {{name}}", payload: #"{"deep":"app://welcome/{{name}}"}"#),
            ],
            createdAt: now, updatedAt: now
        )
    }

    @Test("a template is saved with its default and per-locale variants, read back, listed by name, per app", arguments: Driver.enabled)
    func saveAndRead(driver: Driver) async throws {
        try await driver.withStore { store in
            try await store.createApp(App(id: "other", bundleID: "com.example.other", createdAt: 1))
            let saved = try await store.saveTemplate(self.welcome(now: 10))
            #expect(saved == self.welcome(now: 10))
            #expect(try await store.template(appID: "demo", id: "tpl_welcome") == self.welcome(now: 10))
            var second = self.welcome(name: "Another", now: 11)
            second.id = "tpl_b"
            second.variants = [:]
            second.defaultVariant = TemplateVariant()
            _ = try await store.saveTemplate(second)
            #expect(try await store.templates(appID: "demo").map(\.id) == ["tpl_b", "tpl_welcome"], "by name: Another, Welcome")
            #expect(try await store.template(appID: "demo", id: "tpl_b")?.defaultVariant == TemplateVariant())
            // Another app sees none of them, not even by id.
            #expect(try await store.templates(appID: "other").isEmpty)
            #expect(try await store.template(appID: "other", id: "tpl_welcome") == nil)
        }
    }

    @Test("saving an existing id replaces its name and variants and keeps when it was created", arguments: Driver.enabled)
    func replace(driver: Driver) async throws {
        try await driver.withStore { store in
            _ = try await store.saveTemplate(self.welcome(now: 10))
            var changed = self.welcome(name: "Welcome back", now: 20)
            changed.variants = ["en": TemplateVariant(body: "Back, {{name}}?")]
            let saved = try await store.saveTemplate(changed)
            #expect(saved.createdAt == 10 && saved.updatedAt == 20 && saved.name == "Welcome back")
            #expect(saved.variants == ["en": TemplateVariant(body: "Back, {{name}}?")], "the old locales are gone")
            #expect(try await store.template(appID: "demo", id: "tpl_welcome") == saved)
            #expect(try await store.templates(appID: "demo").count == 1)
        }
    }

    @Test("a template is deleted once, only in its own app, and goes with its app", arguments: Driver.enabled)
    func delete(driver: Driver) async throws {
        try await driver.withStore { store in
            try await store.createApp(App(id: "other", bundleID: "com.example.other", createdAt: 1))
            _ = try await store.saveTemplate(self.welcome(now: 10))
            var theirs = self.welcome(now: 10)
            theirs.appID = "other"
            _ = try await store.saveTemplate(theirs)
            #expect(try await !store.deleteTemplate(appID: "demo", id: "tpl_missing"))
            #expect(try await store.deleteTemplate(appID: "demo", id: "tpl_welcome"))
            #expect(try await !store.deleteTemplate(appID: "demo", id: "tpl_welcome"))
            #expect(try await store.template(appID: "other", id: "tpl_welcome") == theirs)
            while try await store.deleteAppRows(appID: "other", limit: 100, now: 20) > 0 {}
            #expect(try await store.app("other") == nil)
            #expect(try await store.templates(appID: "other").isEmpty)
        }
    }
}
