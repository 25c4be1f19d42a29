// SPDX-License-Identifier: Apache-2.0

/// A template's text parsed once into literal runs and `{{name}}` variables.
///
/// A variable's name is letters, digits, `_` and `.` (starting with a letter or `_`), with
/// optional spaces inside the braces: `{{ name }}`. A `{{` that does not open such a variable
/// (no closing `}}`, or another name) makes the template invalid, so a typo is refused when
/// the template is saved, not sent as literal braces.
package struct TemplateText: Sendable, Hashable {
    package enum Part: Sendable, Hashable {
        case literal(String)
        case variable(String)
    }

    package var parts: [Part]

    /// The names of the variables it uses, in order of first use.
    package var variables: [String] {
        var seen: Set<String> = []
        return self.parts.compactMap { part in
            guard case .variable(let name) = part, seen.insert(name).inserted else { return nil }
            return name
        }
    }

    package init(parsing text: String) throws(HeraldError) {
        var parts: [Part] = []
        var rest = Substring(text)
        while let open = rest.firstRange(of: "{{") {
            if open.lowerBound > rest.startIndex { parts.append(.literal(String(rest[..<open.lowerBound]))) }
            guard let close = rest[open.upperBound...].firstRange(of: "}}") else {
                throw Self.invalid("a '{{' has no closing '}}'")
            }
            let name = rest[open.upperBound..<close.lowerBound].trimmingSpaces
            guard Self.isName(name) else {
                throw Self.invalid("'{{\(rest[open.upperBound..<close.lowerBound].prefix(40))}}' is not a variable (letters, digits, _ and .)")
            }
            parts.append(.variable(String(name)))
            rest = rest[close.upperBound...]
        }
        if !rest.isEmpty { parts.append(.literal(String(rest))) }
        self.parts = parts
    }

    /// The text with each variable replaced by `value(name)`.
    package func rendered(_ value: (String) throws(HeraldError) -> String) throws(HeraldError) -> String {
        if self.parts.count == 1, case .literal(let text) = self.parts[0] { return text }
        var result = ""
        for part in self.parts {
            switch part {
            case .literal(let text): result += text
            case .variable(let name): result += try value(name)
            }
        }
        return result
    }

    static func isName(_ name: Substring) -> Bool {
        guard let first = name.unicodeScalars.first, first == "_" || first.isASCIILetter else { return false }
        return name.unicodeScalars.allSatisfy { $0 == "_" || $0 == "." || $0.isASCIILetter || ("0"..."9").contains($0) }
            && name.count <= 64
    }

    static func invalid(_ message: String) -> HeraldError {
        HeraldError.invalid("template: \(message)", code: "template_invalid")
    }
}

extension Unicode.Scalar {
    fileprivate var isASCIILetter: Bool { ("a"..."z").contains(self) || ("A"..."Z").contains(self) }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var text = self
        while text.first == " " { text.removeFirst() }
        while text.last == " " { text.removeLast() }
        return text
    }
}
