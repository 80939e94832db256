import { spawnSync } from "node:child_process"

/** The host's unprivileged user, for what a service run as another user than root does. */
export const NOBODY = { uid: 65534, gid: 65534 }

/** Whether `user` can read the checkout and run its Node (a checkout under a private home cannot be). */
export const reachableBy = (user: { readonly uid: number; readonly gid: number }) =>
  spawnSync(
    process.execPath,
    ["-e", "require('fs').accessSync('package.json', require('fs').constants.R_OK)"],
    {
      uid: user.uid,
      gid: user.gid
    }
  ).status === 0
