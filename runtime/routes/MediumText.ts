/**
 * Text from a held call (its summary is made of the agent's arguments) as each medium must carry
 * it: whatever the arguments hold, the message says what the kernel wrote and nothing more. No
 * medium gets control characters (a line break in a mail subject is a new header; one in a chat
 * message fakes a line of the kernel's own text) or the bidi marks and overrides that reorder what
 * is displayed.
 */

// C0 and C1 controls, DEL, and the bidi marks, embeddings, overrides and isolates.
const Unsafe = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g

/** Plain text: every control or bidi character becomes a space. */
export const plainText = (s: string): string => s.replace(Unsafe, " ")

/**
 * Slack mrkdwn (and the chat tools that read it): `&`, `<` and `>` escaped as Slack documents, so
 * `<!channel>`, `<@U123>` and `<http://evil|label>` from an argument stay literal text.
 */
export const chatText = (s: string): string => plainText(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")

/** HTML text and attribute values. */
export const htmlText = (s: string): string =>
  plainText(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;")
