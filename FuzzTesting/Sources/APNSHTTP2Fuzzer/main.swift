// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSEmulator

/// libFuzzer's entry: the same bytes as a frame sequence from APNs to the client's reader and
/// connection state machine, and from a client to the emulator's. A crash, or a broken
/// invariant (a request handed back twice or never, a window past 2^31-1), is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    _APNSClientFuzzing.run(bytes)
    _APNSEmulatorFuzzing.run(bytes)
    return 0
}
