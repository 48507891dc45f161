/* Linked into the sanitizer test programs only: Open MPI unloads its plugins
 * at MPI_Finalize, after which leak reports cannot name the library a frame
 * came from (and suppressions by library cannot match).  A dlclose that
 * keeps the module loaded fixes that; the process exits right after. */
int dlclose(void *handle);

int dlclose(void *handle)
{
    (void)handle;
    return 0;
}
