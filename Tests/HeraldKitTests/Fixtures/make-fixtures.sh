#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Makes the provisioning-profile fixtures ProvisioningProfileTests reads: CMS SignedData (what
# Apple's embedded.mobileprovision / embedded.provisionprofile are) over a property list written
# here, signed with a throw-away self-signed key (HeraldKit does not check the signature).
#   Tests/HeraldKitTests/Fixtures/make-fixtures.sh
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/signer.key" -out "$work/signer.pem" -days 3650 \
  -subj "/CN=HeraldKit test profile signer" 2>/dev/null
plist() {  # NAME ENTITLEMENT-LINES
  cat <<PLIST
<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>AppIDName</key>
	<string>Herald Demo</string>
	<key>Name</key>
	<string>$1</string>
	<key>TeamIdentifier</key>
	<array>
		<string>ABCDE12345</string>
	</array>
	<key>CreationDate</key>
	<date>2026-11-24T12:00:00Z</date>
	<key>Entitlements</key>
	<dict>
		<key>application-identifier</key>
		<string>ABCDE12345.com.example.app</string>
$2
	</dict>
</dict>
</plist>
PLIST
}
sign() {  # IN OUT [openssl cms options]
  local in=$1 out=$2; shift 2
  openssl cms -sign -binary -outform DER -in "$in" -signer "$work/signer.pem" -inkey "$work/signer.key" -out "$out" "$@"
}
plist "Herald Demo Development" $'\t\t<key>aps-environment</key>\n\t\t<string>development</string>' >"$work/development.plist"
plist "Herald Demo App Store" $'\t\t<key>aps-environment</key>\n\t\t<string>production</string>' >"$work/production.plist"
plist "Herald Demo Mac" $'\t\t<key>com.apple.developer.aps-environment</key>\n\t\t<string>development</string>' >"$work/macos.plist"
plist "Herald Demo No Push" "" >"$work/nopush.plist"
echo "this is not a property list" >"$work/garbage.txt"
sign "$work/development.plist" development.mobileprovision -nodetach
sign "$work/production.plist" production.mobileprovision -nodetach
sign "$work/macos.plist" macos.provisionprofile -nodetach
sign "$work/nopush.plist" nopush.mobileprovision -nodetach
# BER with indefinite lengths and the content in pieces (a constructed OCTET STRING).
sign "$work/development.plist" streamed-ber.mobileprovision -nodetach -stream
# Malformed: cut short; a signature over something that is not a plist; detached (no content).
head -c 700 development.mobileprovision >truncated.mobileprovision
sign "$work/garbage.txt" notplist.mobileprovision -nodetach
sign "$work/production.plist" detached.mobileprovision
