/** The package's version (package.json's; a test keeps the two equal). */
export const VERSION = "0.1.0";
