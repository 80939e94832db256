import { Schema } from "effect"
import { wire } from "./ApiError.ts"

// Errors of accounts, members, service accounts, keys, SSH keys and OAuth login,
// with the status, code and message each answers with.

export class AccountNotFound extends Schema.TaggedError<AccountNotFound>()("AccountNotFound", {}) {
  readonly status = 404
  readonly code = "account_not_found"
  override readonly message = "Account not found."
  static readonly Wire = wire(this, () => new AccountNotFound())
}

export class AccountNameTaken extends Schema.TaggedError<AccountNameTaken>()("AccountNameTaken", {}) {
  readonly status = 409
  readonly code = "account_name_taken"
  override readonly message = "Account name is already taken."
  static readonly Wire = wire(this, () => new AccountNameTaken())
}

export class UserNotFound extends Schema.TaggedError<UserNotFound>()("UserNotFound", {}) {
  readonly status = 404
  readonly code = "user_not_found"
  override readonly message = "User not found."
  static readonly Wire = wire(this, () => new UserNotFound())
}

export class MemberNotFound extends Schema.TaggedError<MemberNotFound>()("MemberNotFound", {}) {
  readonly status = 404
  readonly code = "member_not_found"
  override readonly message = "Member not found."
  static readonly Wire = wire(this, () => new MemberNotFound())
}

export class AlreadyMember extends Schema.TaggedError<AlreadyMember>()("AlreadyMember", {}) {
  readonly status = 409
  readonly code = "already_member"
  override readonly message = "User is already a member of this account."
  static readonly Wire = wire(this, () => new AlreadyMember())
}

export class LastOwner extends Schema.TaggedError<LastOwner>()("LastOwner", {}) {
  readonly status = 409
  readonly code = "last_owner"
  override readonly message = "An account needs at least one owner."
  static readonly Wire = wire(this, () => new LastOwner())
}

export class PersonalAccount extends Schema.TaggedError<PersonalAccount>()("PersonalAccount", {}) {
  readonly status = 409
  readonly code = "personal_account"
  override readonly message = "A personal account has no other members."
  static readonly Wire = wire(this, () => new PersonalAccount())
}

export class ServiceAccountNotFound extends Schema.TaggedError<ServiceAccountNotFound>()(
  "ServiceAccountNotFound",
  {}
) {
  readonly status = 404
  readonly code = "service_account_not_found"
  override readonly message = "Service account not found."
  static readonly Wire = wire(this, () => new ServiceAccountNotFound())
}

export class KeyNotFound extends Schema.TaggedError<KeyNotFound>()("KeyNotFound", {}) {
  readonly status = 404
  readonly code = "key_not_found"
  override readonly message = "API key not found."
  static readonly Wire = wire(this, () => new KeyNotFound())
}

export class KeyRevoked extends Schema.TaggedError<KeyRevoked>()("KeyRevoked", {}) {
  readonly status = 409
  readonly code = "key_revoked"
  override readonly message = "API key is already revoked."
  static readonly Wire = wire(this, () => new KeyRevoked())
}

export class SshKeyNotFound extends Schema.TaggedError<SshKeyNotFound>()("SshKeyNotFound", {}) {
  readonly status = 404
  readonly code = "ssh_key_not_found"
  override readonly message = "SSH key not found."
  static readonly Wire = wire(this, () => new SshKeyNotFound())
}

export class SshKeyExists extends Schema.TaggedError<SshKeyExists>()("SshKeyExists", {}) {
  readonly status = 409
  readonly code = "ssh_key_exists"
  override readonly message = "SSH key already exists in this account."
  static readonly Wire = wire(this, () => new SshKeyExists())
}

export class LoginProviderNotFound extends Schema.TaggedError<LoginProviderNotFound>()(
  "LoginProviderNotFound",
  {}
) {
  readonly status = 404
  readonly code = "provider_not_found"
  override readonly message = "Login provider not found."
  static readonly Wire = wire(this, () => new LoginProviderNotFound())
}

export class LoginFailed extends Schema.TaggedError<LoginFailed>()("LoginFailed", {}) {
  readonly status = 400
  readonly code = "login_failed"
  override readonly message = "Login with the provider failed; start again."
  static readonly Wire = wire(this, () => new LoginFailed())
}
