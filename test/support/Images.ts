import * as Path from "node:path"

/** The image store the set-up (`npm test`) builds the default sandbox image into. */
export const IMAGES_DIR = Path.resolve(".data", "images")
