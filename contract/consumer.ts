// A frontend's view of openapi/workspace.json: `cargo xtask check` generates
// `generated/workspace.d.ts` with openapi-typescript and compiles this file
// with `tsc --strict`. Each block uses a part of the contract that a client
// relies on; the `@ts-expect-error` lines must stay errors (if one compiles,
// the document lost precision and tsc fails on the unused directive).

import type { components, paths } from "./generated/workspace";

type Schemas = components["schemas"];

// A request body and its response.
type SignupBody =
  paths["/api/auth/signup"]["post"]["requestBody"]["content"]["application/json"];
type Signup = paths["/api/auth/signup"]["post"]["responses"];

export const signupBody: SignupBody = {
  email: "ada@example.com",
  first_name: "Ada",
  last_name: "Lovelace",
  password: "correct horse battery",
};

export function accountId(created: Signup[201]["content"]["application/json"]): string {
  return created.id;
}

// Specific error statuses, each with the Error body: a 409 of signup is told
// apart from a 422, and `error_code` is always there.
type ApiError = Schemas["Error"];

export function signupProblem(
  status: 400 | 409 | 422,
  body: Signup[typeof status]["content"]["application/json"],
): string {
  const code: string = body.error_code;
  return status === 409 ? `taken (${code})` : `${status} ${code}: ${body.message}`;
}

// @ts-expect-error error_code is required
export const incompleteError: ApiError = { message: "m", request_id: "r" };

// @ts-expect-error signup declares no 418
export type NoTeapot = Signup[418];

// The 429 of login carries Retry-After (seconds) and the Error body.
type LoginLimited = paths["/api/auth/login"]["post"]["responses"][429];

export function retryLogin(response: LoginLimited): { waitSeconds: number; code: string } {
  const wait: number = response.headers["Retry-After"];
  return {
    waitSeconds: wait,
    code: response.content["application/json"].error_code,
  };
}

// Query parameters: optional paging with documented defaults, required org.
type UsersListQuery = NonNullable<paths["/api/users/list"]["get"]["parameters"]["query"]>;

export const firstPage: UsersListQuery = { org_id: "0d3f7a0e-3c1b-4b8e-8f57-7a0f4e4b2d10" };
export const secondPage: UsersListQuery = { ...firstPage, offset: 1, limit: 50 };

// Nullable fields are present: a pending row has `id: null`, and the field
// cannot be left out.
type UserRow = Schemas["UserListItem"];

export function rowKey(row: UserRow): string {
  return row.id ?? `invite:${row.invite_id ?? "?"}`;
}

// @ts-expect-error invited_by is required (null when the inviter is gone)
export const noInviter: Schemas["InvitationPublic"] = {
  id: "i",
  email: "bob@example.com",
  organization: { id: "o", name: "Org" },
  role: { id: "r", name: "member" },
  created_at: "2026-11-01T10:00:00Z",
  expires_at: "2026-11-08T10:00:00Z",
};

// Role create answers the role with its permissions (never null there).
type CreatedRole =
  paths["/api/roles/create"]["post"]["responses"][201]["content"]["application/json"];

export function permissionNames(role: CreatedRole): string[] {
  return role.permissions.map((p) => p.name);
}

// Stream events of POST /api/conversation/stream_chat, narrowed by `type`.
type StreamEvent =
  paths["/api/conversation/stream_chat"]["post"]["responses"][200]["content"]["text/event-stream"];

function unreachable(event: never): never {
  throw new Error(`unknown event ${JSON.stringify(event)}`);
}

export function render(event: StreamEvent, text: string): string {
  switch (event.type) {
    case "start":
      return `[${event.message_id}] `;
    case "content":
      return text + event.content;
    case "reasoning":
      // The model's thinking: shown apart from the answer's text.
      return text;
    case "route":
      // Which model and deployment answer from here on.
      return text;
    case "restart":
      // Another deployment answers from the beginning: drop the partial text.
      return "";
    case "end":
      return text;
    case "error":
      return `${text} (failed: ${event.error_code}: ${event.message})`;
    default:
      return unreachable(event);
  }
}

export function parseEvent(line: string): StreamEvent | undefined {
  return line.startsWith("data: ") ? (JSON.parse(line.slice(6)) as StreamEvent) : undefined;
}
