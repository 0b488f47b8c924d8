export { Type, Codec, PROTOCOL_VERSION, DEFAULT_MAX_LINE, DEFAULT_MAX_OUTBOUND, PROMPT_CACHE_CAP, ENDS_SOON_CAP } from './types.js';
export { ErrorCode, SwarmError, errorCodeOf, isErrorCode } from './errors.js';
// Types only: the zod schemas themselves load zod, which worker processes do without (validate.ts).
export type { Receipt, Message, AnyMessage, Payload, ReplicaEntry, WireSpec, WireLease, WireOutcome } from './schemas.js';
export { validate, type Validated } from './validate.js';
export { LineDecoder, MsgpackDecoder, encodeLine, encodeLineWithPayload, encodeMsgpack, type FrameSink, type Decoder } from './codec.js';
export { Connection, type ConnectionStatus, type ConnectionOptions } from './connection.js';
export { newId, randomId } from './ids.js';
export { seededRandom } from './random.js';
export { safeEqual, isPlaceholderToken, workerCredential, peerSecret } from './auth.js';
export { every } from './shared-clock.js';
