/**
 * How the coordinator ends a connection it refuses or gives up on: it sends the close frame
 * (so that the peer learns the code and why), stops reading, and drops the socket
 * (`terminate`) as soon as that frame has left. A polite `ws.close()` would wait up to 30 s
 * for the peer's own close frame and keep reading meanwhile: a refused peer could go on
 * sending, and ws would go on buffering up to maxPayload per frame.
 */
import type { WebSocket } from 'ws';
import { type CloseKind, CloseCodes, closeReason } from '@admm-share/protocol';

/**
 * Ms the close frame may take to leave (it is queued behind whatever the peer has not read)
 * before the socket is dropped anyway. Usually it leaves at once: the write is synchronous
 * when nothing is queued.
 */
export const CLOSE_FLUSH_MS = 1000;
const FLUSH_POLL_MS = 10;

/** Send the close frame for `kind`, stop reading, and terminate once the frame has left. */
export function closeAndDrop(ws: WebSocket, kind: CloseKind, detail?: string): void {
  if (ws.readyState === ws.OPEN) ws.close(CloseCodes[kind].code, closeReason(kind, detail));
  ws.pause();
  const deadline = performance.now() + CLOSE_FLUSH_MS;
  const drop = () => {
    if (ws.bufferedAmount === 0 || performance.now() >= deadline) ws.terminate();
    else setTimeout(drop, FLUSH_POLL_MS).unref();
  };
  drop();
}
